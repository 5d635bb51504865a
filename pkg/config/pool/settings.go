package pool

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

// ErrSetting marks a FIELD=VALUE that names no setting or whose value the
// setting does not take; the message names both.
var ErrSetting = errors.New("invalid pool setting")

// Setting is one of a pool's settings under the name `slipway pool set`
// takes (warmSize, phaseDeadlines.warm, network.allow, …) and its value as
// text.
type Setting struct {
	Field string `json:"field"`
	Value string `json:"value"`
	// Default is set when pool.yaml does not say and the default applies
	// (phase deadlines only: every other field is required).
	Default bool `json:"default,omitempty"`
}

// Change is a setting Set changed.
type Change struct {
	Field string `json:"field"`
	From  string `json:"from"`
	To    string `json:"to"`
}

func (c Change) String() string { return fmt.Sprintf("%s: %s -> %s", c.Field, c.From, c.To) }

// Assignment is one FIELD=VALUE.
type Assignment struct {
	Field, Value string
}

func (a Assignment) String() string { return a.Field + "=" + a.Value }

// Fields lists the names Set takes, in pool.yaml's order.
func Fields() []string {
	out := []string{"requiredKinds", "warmSize", "refillPerSecond", "readyTimeout"}
	for _, ph := range Phases {
		out = append(out, "phaseDeadlines."+ph)
	}
	out = append(out, "drainDeadline", "onDrainDeadline", "rollbackWindow", "restoreWindow", "network", "network.allow")
	for _, l := range LimitNames {
		out = append(out, "limits."+l)
	}
	return append(out, "acceptUnenforced", "proofs")
}

// ParseAssignment reads FIELD=VALUE (FIELD as Fields lists it, "spec."
// in front allowed; "network.mode" is "network"). Values are checked by Set.
func ParseAssignment(s string) (Assignment, error) {
	f, v, ok := strings.Cut(s, "=")
	f = strings.TrimSpace(f)
	if !ok || f == "" {
		return Assignment{}, fmt.Errorf("%q: %w: want FIELD=VALUE (like warmSize=4, phaseDeadlines.warm=5m)", s, ErrSetting)
	}
	f = strings.TrimPrefix(f, "spec.")
	if f == "network.mode" {
		f = "network"
	}
	return Assignment{Field: f, Value: strings.TrimSpace(v)}, nil
}

// Settings lists the pool's settings under the names Set takes, in
// pool.yaml's order; a phase without a deadline shows the default.
func (p *Pool) Settings() []Setting {
	s := p.Spec
	kinds := make([]string, len(s.RequiredKinds))
	for i, k := range s.RequiredKinds {
		kinds[i] = string(k)
	}
	out := []Setting{
		{Field: "requiredKinds", Value: strings.Join(kinds, ",")},
		{Field: "warmSize", Value: strconv.Itoa(s.WarmSize)},
		{Field: "refillPerSecond", Value: strconv.FormatFloat(s.RefillPerSecond, 'g', -1, 64)},
		{Field: "readyTimeout", Value: FormatDuration(s.ReadyTimeout.Duration)},
	}
	defaults := Default(p.Metadata.Name).Spec.PhaseDeadlines
	for _, ph := range Phases {
		d, ok := s.PhaseDeadlines[ph]
		if !ok {
			d = defaults[ph]
		}
		out = append(out, Setting{Field: "phaseDeadlines." + ph, Value: FormatDuration(d.Duration), Default: !ok})
	}
	proofs := strings.Join(s.Proofs, ",")
	count := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	limits := []Setting{
		{Field: "limits." + LimitCPU, Value: s.Limits.CPU},
		{Field: "limits." + LimitMemory, Value: s.Limits.Memory},
		{Field: "limits." + LimitPids, Value: count(s.Limits.Pids)},
		{Field: "limits." + LimitOpenFiles, Value: count(s.Limits.OpenFiles)},
		{Field: "limits." + LimitWorkspace, Value: s.Limits.Workspace},
	}
	out = append(out,
		Setting{Field: "drainDeadline", Value: FormatDuration(s.DrainDeadline.Duration)},
		Setting{Field: "onDrainDeadline", Value: s.OnDrainDeadline},
		Setting{Field: "rollbackWindow", Value: FormatDuration(s.RollbackWindow.Duration)},
		Setting{Field: "restoreWindow", Value: FormatDuration(s.RestoreWindow.Duration)},
		Setting{Field: "network", Value: s.Network.Mode},
		Setting{Field: "network.allow", Value: strings.Join(s.Network.Allow, ",")},
	)
	out = append(out, limits...)
	return append(out,
		Setting{Field: "acceptUnenforced", Value: strings.Join(s.AcceptUnenforced, ",")},
		Setting{Field: "proofs", Value: proofs, Default: proofs == ""},
	)
}

// FormatDuration writes d as a duration pool.yaml takes, without zero
// units: 5m, 24h, 1h30m, 1m30s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Set applies assignments, in order, to the pool.yaml document b (name
// labels errors), keeping its comments and the order of its keys, and
// validates the whole result with ParsePool. It returns the new document
// and what changed; when nothing changes it returns b itself and no
// changes. A bad field or value is an error wrapping ErrSetting that names
// FIELD=VALUE; a result that does not validate wraps ErrInvalid.
func Set(b []byte, name string, assignments []Assignment) ([]byte, []Change, error) {
	if len(assignments) == 0 {
		return nil, nil, fmt.Errorf("%w: nothing to set (FIELD=VALUE: %s)", ErrSetting, strings.Join(Fields(), ", "))
	}
	root, err := yaml.Parse(string(b))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %v", name, ErrInvalid, err)
	}
	for _, a := range assignments {
		if err := apply(root, a); err != nil {
			return nil, nil, err
		}
	}
	s, err := root.String()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	after, err := ParsePool([]byte(s), name)
	if err != nil {
		return nil, nil, fmt.Errorf("after %s: %w", joinAssignments(assignments), err)
	}
	var before []Setting
	if p, err := ParsePool(b, name); err == nil {
		before = p.Settings()
	}
	var changes []Change
	now := after.Settings()
	for i, set := range now {
		var was Setting
		if i < len(before) {
			was = before[i]
		}
		// Every setting that differs (network=deny also empties
		// network.allow); all assigned ones when the file was unreadable.
		if was != set && (before != nil || slices.ContainsFunc(assignments, func(a Assignment) bool { return a.Field == set.Field })) {
			changes = append(changes, Change{Field: set.Field, From: describe(was), To: describe(set)})
		}
	}
	if len(changes) == 0 {
		return b, nil, nil
	}
	return []byte(s), changes, nil
}

func joinAssignments(as []Assignment) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, " ")
}

func describe(s Setting) string {
	switch {
	case s.Field == "":
		return "(unreadable)"
	case s.Field == "proofs" && s.Default:
		return "(all)"
	case s.Default:
		return s.Value + " (default)"
	case s.Value == "":
		return "(none)"
	}
	return s.Value
}

// apply checks one assignment and writes it into the document.
func apply(root *yaml.RNode, a Assignment) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", a, ErrSetting, fmt.Sprintf(format, args...))
	}
	v := a.Value
	duration := func(positive bool) (*yaml.Node, error) {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil || d < 0:
			return nil, bad("not a duration (like 30s, 5m, 24h)")
		case positive && d == 0:
			return nil, bad("must be above 0")
		}
		return str(v), nil
	}
	list := func(allowed func(string) error) (*yaml.Node, error) {
		if v == "" {
			return nil, nil
		}
		items := strings.Split(v, ",")
		seen := map[string]bool{}
		for i, it := range items {
			it = strings.TrimSpace(it)
			if err := allowed(it); err != nil {
				return nil, err
			}
			if seen[it] {
				return nil, bad("%q listed twice", it)
			}
			seen[it] = true
			items[i] = it
		}
		return yaml.NewListRNode(items...).YNode(), nil
	}
	var (
		path  = []string{"spec"}
		key   = a.Field
		n     *yaml.Node
		err   error
		after func(spec *yaml.RNode) error
	)
	switch a.Field {
	case "warmSize":
		i, perr := strconv.Atoi(v)
		if perr != nil || i < 0 {
			return bad("want a whole number, 0 or more")
		}
		n = scalar(strconv.Itoa(i), "!!int")
	case "refillPerSecond":
		f, perr := strconv.ParseFloat(v, 64)
		if perr != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return bad("want a number above 0 (sandboxes a second, like 2 or 0.5)")
		}
		n = scalar(v, "!!float")
		if _, ierr := strconv.Atoi(v); ierr == nil {
			n.Tag = "!!int"
		}
	case "readyTimeout":
		n, err = duration(true)
	case "drainDeadline", "rollbackWindow", "restoreWindow":
		n, err = duration(false)
	case "onDrainDeadline":
		if v != "wait" && v != "stop" && v != "checkpoint" {
			return bad("want wait, stop or checkpoint")
		}
		n = str(v)
	case "network":
		if v != "deny" && v != "allow-list" {
			return bad("want deny or allow-list")
		}
		path, key, n = []string{"spec", "network"}, "mode", str(v)
		if v == "deny" {
			after = func(nw *yaml.RNode) error { return nw.PipeE(yaml.Clear("allow")) }
		}
	case "network.allow":
		path, key = []string{"spec", "network"}, "allow"
		n, err = list(func(it string) error {
			host, port, serr := net.SplitHostPort(it)
			if p, perr := strconv.Atoi(port); serr != nil || host == "" || perr != nil || p < 1 || p > 65535 {
				return bad("%q is not host:port", it)
			}
			return nil
		})
	case "limits." + LimitCPU, "limits." + LimitMemory, "limits." + LimitWorkspace:
		// Empty unsets it; ParsePool checks the quantity (500m, 64Mi, ...).
		path, key = []string{"spec", "limits"}, strings.TrimPrefix(a.Field, "limits.")
		if v != "" {
			n = str(v)
		}
	case "limits." + LimitPids, "limits." + LimitOpenFiles:
		path, key = []string{"spec", "limits"}, strings.TrimPrefix(a.Field, "limits.")
		if v != "" {
			i, perr := strconv.ParseInt(v, 10, 64)
			if perr != nil || i <= 0 {
				return bad("want a whole number above 0, or nothing to unset it")
			}
			n = scalar(strconv.FormatInt(i, 10), "!!int")
		}
	case "acceptUnenforced":
		n, err = list(func(it string) error {
			if !slices.Contains(LimitNames, it) {
				return bad("unknown limit %q (%s)", it, strings.Join(LimitNames, ", "))
			}
			return nil
		})
	case "proofs":
		n, err = list(func(it string) error {
			if !slices.Contains(Proofs, it) {
				return bad("unknown proof %q (%s)", it, strings.Join(Proofs, ", "))
			}
			return nil
		})
	case "requiredKinds":
		if v == "" {
			return bad("at least one kind is required (%s)", kindNames())
		}
		n, err = list(func(it string) error {
			if !generation.Kind(it).Valid() {
				return bad("unknown kind %q (%s)", it, kindNames())
			}
			return nil
		})
	default:
		ph, ok := strings.CutPrefix(a.Field, "phaseDeadlines.")
		if !ok || !slices.Contains(Phases, ph) {
			return fmt.Errorf("%s: %w: unknown field %q (one of %s)", a, ErrSetting, a.Field, strings.Join(Fields(), ", "))
		}
		path, key = []string{"spec", "phaseDeadlines"}, ph
		if v != "" { // empty: the default applies
			n, err = duration(true)
		}
	}
	if err != nil {
		return err
	}
	parent, err := root.Pipe(yaml.LookupCreate(yaml.MappingNode, path...))
	if err != nil {
		return fmt.Errorf("%s: %w: %v", a, ErrInvalid, err)
	}
	if parent == nil || parent.YNode().Kind != yaml.MappingNode {
		return fmt.Errorf("%s: %w: %s is not a mapping", a, ErrInvalid, strings.Join(path, "."))
	}
	setField(parent.YNode(), key, n)
	if after != nil {
		return after(parent)
	}
	return nil
}

func kindNames() string {
	var s []string
	for _, k := range generation.Kinds() {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

func scalar(v, tag string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v, Tag: tag} }
func str(v string) *yaml.Node         { return scalar(v, "!!str") }

// setField sets key of mapping m to n (nil removes it), keeping the
// comments of the key and of the value (and a list's flow style); a new
// key goes at the end.
func setField(m *yaml.Node, key string, n *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key {
			continue
		}
		if n == nil {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
		old := m.Content[i+1]
		if old.Kind == yaml.ScalarNode && n.Kind == yaml.ScalarNode {
			old.Value, old.Tag, old.Style = n.Value, n.Tag, 0
			return
		}
		n.HeadComment, n.LineComment, n.FootComment = old.HeadComment, old.LineComment, old.FootComment
		if old.Kind == n.Kind {
			n.Style = old.Style // a flow list stays one
		}
		m.Content[i+1] = n
		return
	}
	if n != nil {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key, Tag: "!!str"}, n)
	}
}
