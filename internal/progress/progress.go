package progress

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Modes of --progress.
const (
	Auto   = "auto"
	Always = "always"
	Never  = "never"
)

// Enabled decides whether to show progress on w: always, never, or (auto)
// only when w is a terminal, the output is not structured (-o json or
// yaml) and the environment is no CI run (CI=true).
func Enabled(mode string, w io.Writer, structured bool, getenv func(string) string) (bool, error) {
	switch mode {
	case Always:
		return true, nil
	case Never:
		return false, nil
	case Auto, "":
		return IsTerminal(w) && !structured && !strings.EqualFold(getenv("CI"), "true"), nil
	}
	return false, fmt.Errorf("--progress must be auto, always or never, got %q", mode)
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Printer shows a status line on w. A nil *Printer shows nothing, so
// code can report unconditionally.
type Printer struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	width  int // the terminal's columns (0: unknown)
	render func(time.Time) string
	shown  string
	at     time.Time
	now    func() time.Time
	stop   chan struct{}
	done   chan struct{}
}

// Interval is how often a status line is redrawn (its clock moves), and
// the least time between two lines outside a terminal.
const Interval = time.Second

// New returns a Printer on w, redrawing in place when tty. Close it.
func New(w io.Writer, tty bool) *Printer {
	p := &Printer{w: w, tty: tty, now: time.Now, stop: make(chan struct{}), done: make(chan struct{})}
	if f, ok := w.(*os.File); ok && tty {
		p.width, _, _ = term.GetSize(int(f.Fd()))
	}
	go p.tick()
	return p
}

func (p *Printer) tick() {
	defer close(p.done)
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.draw(false)
			p.mu.Unlock()
		}
	}
}

// Status sets the status line; render is called again each Interval (for
// a clock that runs: "deadline in 41s").
func (p *Printer) Status(render func(now time.Time) string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.render = render
	p.draw(true)
}

// Statusf sets a status line that does not change by itself.
func (p *Printer) Statusf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	p.Status(func(time.Time) string { return s })
}

// draw shows the status (p.mu held). Outside a terminal a line is printed
// only when the text changed, and at most once per Interval unless urgent.
func (p *Printer) draw(urgent bool) {
	if p.render == nil {
		return
	}
	now := p.now()
	s := p.render(now)
	if s == p.shown && !p.tty {
		return
	}
	if p.tty {
		if p.width > 1 && len([]rune(s)) >= p.width {
			s = string([]rune(s)[:p.width-2]) + "…"
		}
		fmt.Fprintf(p.w, "\r\x1b[K%s", s)
	} else {
		if !urgent && now.Sub(p.at) < Interval {
			return
		}
		fmt.Fprintln(p.w, s)
	}
	p.shown, p.at = s, now
}

// Clear removes the status line (before other output, and at the end).
func (p *Printer) Clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.render = nil
	if p.tty && p.shown != "" {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.shown = ""
}

// Close clears the line and stops redrawing.
func (p *Printer) Close() {
	if p == nil {
		return
	}
	p.Clear()
	close(p.stop)
	<-p.done
}

// Bytes is n bytes for people: 512 B, 3.4 MiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Wrap returns a writer of whole lines to w that first clears the status
// line and then draws it again, so that log lines and the status line do
// not mix.
func (p *Printer) Wrap(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return &wrapped{p: p, w: w}
}

type wrapped struct {
	p *Printer
	w io.Writer
}

func (x *wrapped) Write(b []byte) (int, error) {
	x.p.mu.Lock()
	defer x.p.mu.Unlock()
	if x.p.tty && x.p.shown != "" {
		fmt.Fprint(x.p.w, "\r\x1b[K")
		x.p.shown = ""
	}
	n, err := x.w.Write(b)
	if x.p.tty {
		x.p.draw(true)
	}
	return n, err
}

// LineWriter returns a writer that makes each whole line written to it the
// status line, after prefix (a library's one-line-per-phase log shown as
// progress).
func (p *Printer) LineWriter(prefix string) io.Writer {
	return &lineWriter{p: p, prefix: prefix}
}

type lineWriter struct {
	p       *Printer
	prefix  string
	partial []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		l.p.Statusf("%s%s", l.prefix, line)
	}
}
