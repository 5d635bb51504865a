package isolate

// BornInCgroup reports whether Start forked p's bwrap inside its
// Spec.Cgroup rather than moving it in after the fork.
func BornInCgroup(p *Process) bool { return p.bornIn }

// StartsInside reports whether Start forks sandboxes inside c's cgroups.
func StartsInside(c *Cgroups) bool { return c.home != nil }

// CPUDir is the directory of c's cpu controller for its sandboxes.
func CPUDir(c *Cgroups) string { return c.dirs[ControllerCPU] }

// WithoutSeccompOnly leaves out s's seccomp filter and nothing else.
func WithoutSeccompOnly(s *Spec) { s.noSeccompOnly = true }

// WithoutDisableUsernsOnly leaves out s's --disable-userns and nothing else.
func WithoutDisableUsernsOnly(s *Spec) { s.noDisableUsernsOnly = true }
