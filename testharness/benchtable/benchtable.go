package benchtable

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Row is one line of the table.
type Row struct {
	Bench   string  `json:"bench"`   // "B1", "B8a SQLite"
	What    string  `json:"what"`    // the work, in a few words
	Slipway string  `json:"slipway"` // Slipway's figure, with its unit
	Peer    string  `json:"peer"`    // the peer's figure and what the peer is
	Ratio   float64 `json:"ratio"`   // Slipway over the peer (or over the ideal)
	// NoPeer says the benchmark has no peer: the ratio is not printed.
	NoPeer bool   `json:"noPeer,omitempty"`
	Target string `json:"target"` // "<= 1.25x ideal"; empty: no target, shown as "-"
	Met    bool   `json:"met"`
	// Settings names the settings of each side where they cannot be equal.
	Settings string `json:"settings,omitempty"`
	// Load is the one-minute load average when the row was made; Steal the
	// share of CPU time the hypervisor took over the measurement, in percent
	// (-1 when /proc/stat could not be read).
	Load  float64 `json:"load"`
	Steal float64 `json:"steal"`
	CPUs  int     `json:"cpus"`
}

// Sampler reads the CPU counters at the start of a measurement, so that a
// row can carry the steal time over it.
type Sampler struct {
	steal, total uint64
	ok           bool
}

// Start reads /proc/stat now.
func Start() *Sampler {
	s := &Sampler{}
	s.steal, s.total, s.ok = readStat("/proc/stat")
	return s
}

// Finish fills the row's load average and steal time (over the time since
// Start) and the number of CPUs.
func (s *Sampler) Finish(r Row) Row {
	r.Load = readLoad("/proc/loadavg")
	r.Steal = -1
	if steal, total, ok := readStat("/proc/stat"); ok && s.ok && total > s.total {
		r.Steal = 100 * float64(steal-s.steal) / float64(total-s.total)
	}
	r.CPUs = cpus("/proc/stat")
	return r
}

// Emit prints the row as a BENCHROW line and appends it to $BENCH_OUT when
// set. A row that cannot be written fails the benchmark.
func Emit(tb testing.TB, r Row) {
	tb.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		tb.Fatalf("benchtable: %v", err)
	}
	fmt.Printf("BENCHROW %s\n", b)
	path := os.Getenv("BENCH_OUT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatalf("benchtable: BENCH_OUT: %v", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		tb.Fatalf("benchtable: BENCH_OUT %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		tb.Fatalf("benchtable: BENCH_OUT %s: %v", path, err)
	}
}

// Read reads the rows of a BENCH_OUT file, or the BENCHROW lines of a
// benchmark's output, in order. A line it cannot parse is an error naming
// the line.
func Read(r io.Reader) ([]Row, error) {
	var rows []Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "BENCHROW "); i >= 0 {
			line = line[i+len("BENCHROW "):]
		} else if !strings.HasPrefix(line, "{") {
			continue
		}
		var row Row
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// Markdown writes the rows as one Markdown table.
func Markdown(w io.Writer, rows []Row) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "| benchmark | what | Slipway | peer | ratio | target | met | load (1 min) / steal |")
	fmt.Fprintln(bw, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		met := "missed"
		if r.Met {
			met = "met"
		}
		target := r.Target
		if target == "" {
			target, met = "-", "-"
		}
		peer := r.Peer
		if r.Settings != "" {
			peer += " (settings: " + r.Settings + ")"
		}
		steal := "steal n/a"
		if r.Steal >= 0 {
			steal = fmt.Sprintf("steal %.1f%%", r.Steal)
		}
		load := fmt.Sprintf("%.2f on %d CPUs, %s", r.Load, r.CPUs, steal)
		ratio := fmt.Sprintf("%.2fx", r.Ratio)
		if r.NoPeer {
			ratio = "-"
			if peer == "" {
				peer = "-"
			}
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %s | %s | %s | %s | %s |\n",
			cell(r.Bench), cell(r.What), cell(r.Slipway), cell(peer), ratio, cell(target), met, load)
	}
	return bw.Flush()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func readLoad(path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// readStat returns the steal and total jiffies of the "cpu" line.
func readStat(path string) (steal, total uint64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		// user nice system idle iowait irq softirq steal [guest guest_nice]:
		// guest time is already counted in user, so the total stops at steal.
		for i := 1; i <= 8; i++ {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, 0, false
			}
			total += v
			if i == 8 {
				steal = v
			}
		}
		return steal, total, true
	}
	return 0, 0, false
}

func cpus(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "cpu") && len(line) > 3 && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return n
}
