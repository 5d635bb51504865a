package generation

import "fmt"

// Difference is what changed from one generation to another.
type Difference struct {
	// Pins are the kinds whose pin changed, in the order of Kinds.
	Pins []Change
	// Compatibility is set when the compatibility changed.
	Compatibility *CompatibilityChange
}

// Change is one kind's pin in two generations; From is zero when the kind
// was added, To when it was removed.
type Change struct {
	Kind     Kind
	From, To Pin
}

// CompatibilityChange is the compatibility of two generations.
type CompatibilityChange struct {
	From, To Compatibility
}

// Diff compares generation a with generation b: which pins changed (with
// their tags and identities) and whether the compatibility did. Sequence
// and Verification are not compared. Generations of different pools can
// be compared.
func Diff(a, b *Generation) Difference {
	var d Difference
	union := map[Kind]bool{}
	for k := range a.Pins {
		union[k] = true
	}
	for k := range b.Pins {
		union[k] = true
	}
	for _, k := range sortedKinds(union) {
		from, to := a.Pins[k], b.Pins[k]
		if !from.Equal(to) {
			d.Pins = append(d.Pins, Change{Kind: k, From: from.clone(), To: to.clone()})
		}
	}
	if a.Compatibility != b.Compatibility {
		d.Compatibility = &CompatibilityChange{From: a.Compatibility, To: b.Compatibility}
	}
	return d
}

// Empty reports whether nothing changed.
func (d Difference) Empty() bool { return len(d.Pins) == 0 && d.Compatibility == nil }

// Added reports whether the kind is pinned only in the second generation.
func (c Change) Added() bool { return c.From.IsZero() }

// Removed reports whether the kind is pinned only in the first generation.
func (c Change) Removed() bool { return c.To.IsZero() }

// SameIdentity reports whether the identity (digest, commit or id) is
// unchanged and only what names it changed: a tag, a git ref, a label, a
// repository.
func (c Change) SameIdentity() bool {
	return !c.Added() && !c.Removed() && c.From.Form() == c.To.Form() && c.From.Identity() == c.To.Identity()
}

// String is "kind: from -> to", "kind: added to" or "kind: removed from".
func (c Change) String() string {
	switch {
	case c.Added():
		return fmt.Sprintf("%s: added %s", c.Kind, c.To)
	case c.Removed():
		return fmt.Sprintf("%s: removed %s", c.Kind, c.From)
	}
	return fmt.Sprintf("%s: %s -> %s", c.Kind, c.From, c.To)
}

// String names each range that changed, from and to:
// "controlPlaneProtocol 3..4 -> 4..5".
func (c CompatibilityChange) String() string {
	var s string
	add := func(name string, a, b Range) {
		if a == b {
			return
		}
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s %s -> %s", name, a, b)
	}
	add("controlPlaneProtocol", c.From.ControlPlaneProtocol, c.To.ControlPlaneProtocol)
	add("runnerProtocol", c.From.RunnerProtocol, c.To.RunnerProtocol)
	return s
}
