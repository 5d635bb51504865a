package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEnabled(t *testing.T) {
	env := func(ci string) func(string) string {
		return func(k string) string {
			if k == "CI" {
				return ci
			}
			return ""
		}
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		mode       string
		structured bool
		ci         string
		want       bool
	}{
		{Always, true, "true", true},
		{Never, false, "", false},
		{Auto, false, "", false}, // a file is no terminal
		{"", false, "", false},
	} {
		got, err := Enabled(tc.mode, f, tc.structured, env(tc.ci))
		if err != nil || got != tc.want {
			t.Errorf("%+v: %v %v", tc, got, err)
		}
	}
	if _, err := Enabled("sometimes", f, false, env("")); err == nil || !strings.Contains(err.Error(), "auto, always or never") {
		t.Errorf("a bad mode: %v", err)
	}
	if IsTerminal(&bytes.Buffer{}) || IsTerminal(f) {
		t.Error("a buffer or a file taken for a terminal")
	}
}

func TestPrinterLines(t *testing.T) {
	var b bytes.Buffer
	p := &Printer{w: &b, now: time.Now}
	p.Statusf("one")
	p.Statusf("one") // unchanged: not printed again
	p.Statusf("two")
	p.Clear()
	if got := b.String(); got != "one\ntwo\n" {
		t.Fatalf("lines outside a terminal: %q", got)
	}
	b.Reset()
	tty := &Printer{w: &b, tty: true, now: time.Now}
	tty.Statusf("a")
	tty.Statusf("b")
	tty.Clear()
	if got := b.String(); got != "\r\x1b[Ka\r\x1b[Kb\r\x1b[K" {
		t.Fatalf("a terminal's line: %q", got)
	}
	var nilp *Printer
	nilp.Statusf("nothing") // a nil Printer shows nothing
	nilp.Close()
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 << 20: "3.0 MiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestLineWriter(t *testing.T) {
	var b bytes.Buffer
	p := &Printer{w: &b, now: time.Now}
	w := p.LineWriter("build: ")
	w.Write([]byte("pull base x\nfre"))
	w.Write([]byte("eze\n"))
	if got := b.String(); got != "build: pull base x\nbuild: freeze\n" {
		t.Fatalf("%q", got)
	}
}
