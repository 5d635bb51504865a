package scan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

const (
	// blockSize is the read buffer of the content scanner: the most memory a
	// file costs, however large it is.
	blockSize = 64 << 10
	// sniffSize is how much of a file is checked for a NUL byte (binary).
	sniffSize = 8 << 10
	// overlap is how much of a line longer than the buffer is carried into
	// the next piece, so a match straddling the cut is still seen (matches
	// are bounded well below it; duplicates collapse per rule and line).
	overlap = 1 << 10
)

// contentScanner runs the content rules over one file's bytes, block by
// block. It finds at most one finding per rule and line.
type contentScanner struct {
	path   string
	config bool // the file is a well-known config file: RuleHighEntropy applies
	out    []Finding
	seen   map[ruleLine]bool
	// gcpType and gcpKey are the lines of "type": "service_account" and a
	// non-empty "private_key" (0 when not seen).
	gcpType, gcpKey int
	// pendKey is the line of a private key header that ended its line; the
	// next non-blank line decides (see privatekey.go).
	pendKey    int
	pendDetail string
	// values, when non-nil, collects each finding's matched secret so tests
	// can assert it never reaches a report. Never set outside tests.
	values *[][]byte
}

type ruleLine struct {
	rule Rule
	line int
}

func (s *contentScanner) add(r Rule, line int, detail string, value []byte) {
	k := ruleLine{r, line}
	if s.seen[k] {
		return
	}
	if s.seen == nil {
		s.seen = make(map[ruleLine]bool)
	}
	s.seen[k] = true
	s.out = append(s.out, Finding{Rule: r, Path: s.path, Line: line, Detail: detail})
	if s.values != nil {
		*s.values = append(*s.values, bytes.Clone(value))
	}
}

// errBinary stops a scan of a file whose first bytes hold a NUL.
var errBinary = errors.New("binary file")

// scan reads r to the end through buf and returns the bytes read. A line
// longer than buf is scanned in pieces, each repeating the last carry bytes
// of the one before (carry < len(buf)). With sniff it stops with errBinary
// when the first sniffSize bytes hold a NUL.
func (s *contentScanner) scan(r io.Reader, buf []byte, carry int, sniff bool) (int64, error) {
	var total int64
	filled, line := 0, 1
	mid := false // buf starts in the middle of a line (a long line's next piece)
	first := true
	for {
		k, err := io.ReadFull(r, buf[filled:])
		total += int64(k)
		filled += k
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			return total, err
		}
		data := buf[:filled]
		if first && sniff && bytes.IndexByte(data[:min(len(data), sniffSize)], 0) >= 0 {
			return total, errBinary
		}
		first = false
		if eof {
			s.block(data, line, mid, false)
			s.finish()
			return total, nil
		}
		if cut := bytes.LastIndexByte(data, '\n'); cut >= 0 {
			s.block(data[:cut+1], line, mid, false)
			line += bytes.Count(data[:cut+1], []byte{'\n'})
			filled = copy(buf, data[cut+1:])
			mid = false
			continue
		}
		// One line fills the buffer: scan this piece and keep its tail.
		s.block(data, line, mid, true)
		filled = copy(buf, data[len(data)-carry:])
		mid = true
	}
}

// scanBytes runs the content rules over b in one block.
func (s *contentScanner) scanBytes(b []byte) {
	s.block(b, 1, false, false)
	s.finish()
}

// block scans b, whose first line is number line; mid says b starts in the
// middle of that line, cut that b ends in the middle of its last line.
func (s *contentScanner) block(b []byte, line int, mid, cut bool) {
	var active [nSlots]bool
	hit := findAnchors(b, &active)
	keys, gcpType, gcpKey := active[slotKey], active[slotGCPType], active[slotGCPKey]
	busy := hit || s.config
	if !busy && s.pendKey == 0 {
		return
	}
	for n := line; len(b) > 0; n++ {
		l := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			l, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if s.pendKey > 0 && n > s.pendKey {
			s.resolveKey(l)
		}
		if !busy {
			if s.pendKey == 0 {
				return
			}
			continue
		}
		if keys && bytes.Contains(l, trigPrivateKey) {
			s.privateKey(n, l, cut && len(b) == 0)
		}
		for i, r := range lineRules {
			if !active[i] || !hasAny(l, r.triggers) {
				continue
			}
			if detail, v, ok := r.check(l); ok {
				s.add(r.id, n, detail, v)
			}
		}
		if gcpType && s.gcpType == 0 && bytes.Contains(l, trigGCPType) && reGCPType.Match(l) {
			s.gcpType = n
		}
		if gcpKey && s.gcpKey == 0 && bytes.Contains(l, trigGCPKey) && reGCPKey.Match(l) {
			s.gcpKey = n
		}
		if s.config && !(mid && n == line) {
			if detail, v, ok := checkConfigLine(l); ok {
				s.add(RuleHighEntropy, n, detail, v)
			}
		}
	}
}

// finish reports what needs the whole file.
func (s *contentScanner) finish() {
	if s.gcpType > 0 && s.gcpKey > 0 {
		s.add(RuleGCPServiceAccount, s.gcpKey, fmt.Sprintf("GCP service account key file (type on line %d)", s.gcpType), nil)
	}
}

// Slots of the block prefilter: lineRules by index (TestSlots checks they
// fit below slotKey), then these.
const (
	slotKey = iota + 8 // "PRIVATE KEY"
	slotGCPType
	slotGCPKey
	nSlots
)

// anchorGroup holds the triggers that share a first byte, so one
// bytes.IndexByte pass over a block finds them all: fewer passes than one
// bytes.Index per trigger, which dominated the profile.
type anchorGroup struct {
	first byte
	pats  []anchorPat
}

type anchorPat struct {
	rest []byte // the trigger without its first byte
	slot int
}

// Triggers of the rules handled beside lineRules.
var (
	trigPrivateKey = []byte("PRIVATE KEY")
	trigGCPType    = []byte(`"service_account"`)
	trigGCPKey     = []byte(`"private_key"`)
)

var anchors = buildAnchors()

func buildAnchors() []anchorGroup {
	var groups []anchorGroup
	add := func(t []byte, slot int) {
		for i := range groups {
			if groups[i].first == t[0] {
				groups[i].pats = append(groups[i].pats, anchorPat{t[1:], slot})
				return
			}
		}
		groups = append(groups, anchorGroup{first: t[0], pats: []anchorPat{{t[1:], slot}}})
	}
	for i, r := range lineRules {
		for _, t := range r.triggers {
			add(t, i)
		}
	}
	add(trigPrivateKey, slotKey)
	add(trigGCPType, slotGCPType)
	add(trigGCPKey, slotGCPKey)
	return groups
}

// findAnchors marks the slots whose triggers occur in b and reports whether
// any does.
func findAnchors(b []byte, active *[nSlots]bool) bool {
	hit := false
	for _, g := range anchors {
		for i := 0; ; {
			j := bytes.IndexByte(b[i:], g.first)
			if j < 0 {
				break
			}
			i += j + 1
			open := false
			for _, p := range g.pats {
				if active[p.slot] {
					continue
				}
				open = true
				if bytes.HasPrefix(b[i:], p.rest) {
					active[p.slot], hit = true, true
				}
			}
			if !open {
				break
			}
		}
	}
	return hit
}

func hasAny(b []byte, ts [][]byte) bool {
	for _, t := range ts {
		if bytes.Contains(b, t) {
			return true
		}
	}
	return false
}
