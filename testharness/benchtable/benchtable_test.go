package benchtable

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStatSteal(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "stat")
	os.WriteFile(p, []byte("cpu  100 0 50 800 10 0 5 35 7 0\ncpu0 50 0 25 400 5 0 2 18 0 0\ncpu1 50 0 25 400 5 0 3 17 0 0\n"), 0o644)
	steal, total, ok := readStat(p)
	if !ok || steal != 35 || total != 1000 {
		t.Fatalf("readStat = %d %d %v, want 35 1000 true", steal, total, ok)
	}
	if n := cpus(p); n != 2 {
		t.Fatalf("cpus = %d, want 2", n)
	}
}

func TestEmitAppendsToBenchOut(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rows")
	t.Setenv("BENCH_OUT", p)
	s := Start()
	Emit(t, s.Finish(Row{Bench: "B1", Ratio: 1.1, Met: true}))
	Emit(t, s.Finish(Row{Bench: "B2", Ratio: 2}))
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Bench != "B1" || rows[1].Bench != "B2" || !rows[0].Met || rows[1].Met {
		t.Fatalf("rows = %+v", rows)
	}
	if rows[0].CPUs == 0 || rows[0].Load < 0 {
		t.Fatalf("load and CPUs not read from /proc: %+v", rows[0])
	}
}

func TestReadNamesBadLine(t *testing.T) {
	_, err := Read(strings.NewReader("ok\nBENCHROW {\"bench\":\"B1\"}\nBENCHROW {bad\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want one naming line 3", err)
	}
}
