package isolate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cgroup versions Cgroups reports.
const (
	CgroupV1   = "v1"
	CgroupV2   = "v2"
	CgroupNone = "none"
)

// Controllers a Cgroup can limit.
const (
	ControllerCPU    = "cpu"
	ControllerMemory = "memory"
	ControllerPids   = "pids"
)

var controllers = []string{ControllerCPU, ControllerMemory, ControllerPids}

// Cgroups is where this process may make cgroups for its sandboxes: a
// directory named by DetectCgroups under this process's own cgroup, in
// the cgroup v2 tree where that tree has the controllers and lets this
// process delegate them, otherwise in each cgroup v1 hierarchy (cpu,
// memory, pids) whose directory this process can create. It is immutable.
type Cgroups struct {
	version string
	dirs    map[string]string // controller -> parent directory for sandboxes
	reason  string            // why a controller is missing, for errors
	// home is this process's own v1 cgroup per controller in dirs, where
	// a thread that entered a sandbox's cgroup to start it goes back (see
	// Cgroup.enter); nil when threads of this process cannot move
	// themselves there (v2, or no write access).
	home map[string]string
}

// Version is CgroupV2, CgroupV1 or CgroupNone.
func (c *Cgroups) Version() string { return c.version }

// Controllers lists the controllers this host lets sandboxes be limited
// by, sorted.
func (c *Cgroups) Controllers() []string {
	var out []string
	for k := range c.dirs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Reason says why controllers are missing ("" when all are there).
func (c *Cgroups) Reason() string { return c.reason }

// DetectCgroups finds out which cgroup controllers this process can use and
// makes a directory named name (one path element) for its sandboxes'
// cgroups under its own cgroup in each. It never fails: a host without
// writable cgroups gives version CgroupNone and a Reason.
func DetectCgroups(name string) *Cgroups {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return &Cgroups{version: CgroupNone, reason: fmt.Sprintf("bad cgroup name %q", name)}
	}
	own, err := ownCgroups()
	if err != nil {
		return &Cgroups{version: CgroupNone, reason: err.Error()}
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return &Cgroups{version: CgroupNone, reason: err.Error()}
	}
	var reasons []string
	if c, why := detectV2(name, own, mounts); c != nil {
		return c
	} else if why != "" {
		reasons = append(reasons, "cgroup v2: "+why)
	}
	c := &Cgroups{version: CgroupV1, dirs: map[string]string{}}
	for _, ctl := range controllers {
		m, ok := mounts[ctl]
		if !ok {
			reasons = append(reasons, "cgroup v1: no "+ctl+" hierarchy mounted")
			continue
		}
		p, ok := own[ctl]
		if !ok {
			reasons = append(reasons, "cgroup v1: this process is in no "+ctl+" cgroup")
			continue
		}
		rel, err := filepath.Rel(m.root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			reasons = append(reasons, fmt.Sprintf("cgroup v1: own %s cgroup %s is outside the mounted %s", ctl, p, m.root))
			continue
		}
		dir := filepath.Join(m.point, rel, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			reasons = append(reasons, fmt.Sprintf("cgroup v1: %s: %v", ctl, err))
			continue
		}
		c.dirs[ctl] = dir
		if ctl == ControllerCPU {
			weighSandboxes(CgroupV1, dir)
		}
	}
	if len(c.dirs) == 0 {
		c.version = CgroupNone
	} else {
		c.home = map[string]string{}
		for ctl, dir := range c.dirs {
			c.home[ctl] = filepath.Dir(dir)
		}
		if !canReturnHome(c.home) {
			c.home = nil
		}
	}
	c.reason = strings.Join(reasons, "; ")
	return c
}

// detectV2 uses the unified hierarchy when it holds every controller and
// this process can enable them for a child directory (a delegated
// subtree whose cgroup holds no process of its own besides children).
func detectV2(name string, own map[string]string, mounts map[string]cgroupMount) (*Cgroups, string) {
	m, ok := mounts[""]
	p, ok2 := own[""]
	if !ok || !ok2 {
		return nil, ""
	}
	rel, err := filepath.Rel(m.root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, "own cgroup outside the mount"
	}
	base := filepath.Join(m.point, rel)
	avail, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return nil, err.Error()
	}
	have := strings.Fields(string(avail))
	for _, ctl := range controllers {
		if !slices.Contains(have, ctl) {
			return nil, fmt.Sprintf("controller %s not available in %s (has %q)", ctl, base, strings.TrimSpace(string(avail)))
		}
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err.Error()
	}
	enable := "+cpu +memory +pids"
	if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		return nil, fmt.Sprintf("enable controllers in %s: %v", base, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		return nil, fmt.Sprintf("enable controllers in %s: %v", dir, err)
	}
	weighSandboxes(CgroupV2, dir)
	return &Cgroups{version: CgroupV2, dirs: map[string]string{ControllerCPU: dir, ControllerMemory: dir, ControllerPids: dir}}, ""
}

// weighSandboxes gives the sandboxes' parent cgroup dir the CPU weight of
// the whole machine (cpu.shares 1024 per CPU on v1, cpu.weight 100 per CPU
// on v2), as Kubernetes weighs its pods' cgroup: at its parent's level the
// group of every sandbox competes with each thread of this process alone,
// and at the default weight (one thread's) starting sandboxes got less
// CPU than outside a cpu cgroup (benchmark B11's cold starts with a cpu
// limit alone were slower than with none). A weight is a preference, not a limit: a
// host that refuses it keeps the default, and each sandbox's quota still
// bounds it.
func weighSandboxes(version, dir string) {
	n := goruntime.NumCPU()
	file, v := "cpu.shares", strconv.Itoa(1024*n)
	if version == CgroupV2 {
		file, v = "cpu.weight", strconv.Itoa(min(100*n, 10000))
	}
	_ = os.WriteFile(filepath.Join(dir, file), []byte(v), 0)
}

type cgroupMount struct{ point, root string }

// cgroupMounts maps each v1 controller (and "" for the v2 tree) to where
// its hierarchy is mounted, from /proc/self/mountinfo.
func cgroupMounts() (map[string]cgroupMount, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{point: unescapeMount(f[4]), root: unescapeMount(f[3])}
		switch g[0] {
		case "cgroup2":
			if _, dup := out[""]; !dup {
				out[""] = m
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if slices.Contains(controllers, o) {
					if _, dup := out[o]; !dup {
						out[o] = m
					}
				}
			}
		}
	}
	return out, nil
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// ownCgroups maps each v1 controller (and "" for v2) to this process's
// cgroup path, from /proc/self/cgroup.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			out[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out, nil
}

// CgroupLimits are aggregate limits over every process of a sandbox;
// zero leaves one unset.
type CgroupLimits struct {
	CPUMillis   uint64 // thousandths of a core (a CFS quota per 100ms period)
	MemoryBytes uint64 // memory (and memory plus swap, where the host counts it)
	Pids        uint64 // processes and threads alive at once
}

func (l CgroupLimits) needs() []string {
	var out []string
	if l.CPUMillis > 0 {
		out = append(out, ControllerCPU)
	}
	if l.MemoryBytes > 0 {
		out = append(out, ControllerMemory)
	}
	if l.Pids > 0 {
		out = append(out, ControllerPids)
	}
	return out
}

// Cgroup is one sandbox's cgroup (one directory per v1 hierarchy, or one
// v2 directory). Give it to Spec.Cgroup: Start puts bwrap into it before
// bwrap starts anything, so every process of the sandbox is in it.
type Cgroup struct {
	version string
	dirs    map[string]string // controller -> directory
	home    map[string]string // Cgroups.home: nil when Start must move bwrap in after forking it
}

// cgroupPeriod is the CFS period CPU quotas are given in (100ms).
const cgroupPeriod = 100000

// ErrCgroup wraps failures to make, fill or remove a cgroup.
var ErrCgroup = errors.New("isolate: cgroup")

// New makes the cgroup id (one path element) with limits l. It fails
// naming the controller when l needs one the host does not offer.
func (c *Cgroups) New(id string, l CgroupLimits) (*Cgroup, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return nil, fmt.Errorf("%w: bad cgroup name %q", ErrCgroup, id)
	}
	g := &Cgroup{version: c.version, dirs: map[string]string{}, home: c.home}
	for _, ctl := range l.needs() {
		if _, ok := c.dirs[ctl]; !ok {
			return nil, fmt.Errorf("%w: the host offers no writable %s controller (%s)", ErrCgroup, ctl, c.reason)
		}
	}
	// Every controller the host has, limited or not: the counters and the
	// cleanup need no special case.
	for ctl, parent := range c.dirs {
		dir := filepath.Join(parent, id)
		if c.version == CgroupV2 && len(g.dirs) > 0 {
			g.dirs[ctl] = dir
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			_ = g.Remove()
			return nil, fmt.Errorf("%w: %v", ErrCgroup, err)
		}
		g.dirs[ctl] = dir
	}
	if err := g.set(l); err != nil {
		_ = g.Remove()
		return nil, err
	}
	return g, nil
}

func (g *Cgroup) set(l CgroupLimits) error {
	w := func(ctl, file, v string) error {
		if err := os.WriteFile(filepath.Join(g.dirs[ctl], file), []byte(v), 0); err != nil {
			return fmt.Errorf("%w: set %s: %v", ErrCgroup, file, err)
		}
		return nil
	}
	var errs []error
	if l.CPUMillis > 0 {
		quota := strconv.FormatUint(l.CPUMillis*cgroupPeriod/1000, 10)
		if g.version == CgroupV2 {
			errs = append(errs, w(ControllerCPU, "cpu.max", quota+" "+strconv.Itoa(cgroupPeriod)))
		} else {
			errs = append(errs, w(ControllerCPU, "cpu.cfs_period_us", strconv.Itoa(cgroupPeriod)),
				w(ControllerCPU, "cpu.cfs_quota_us", quota))
		}
	}
	if l.MemoryBytes > 0 {
		v := strconv.FormatUint(l.MemoryBytes, 10)
		if g.version == CgroupV2 {
			errs = append(errs, w(ControllerMemory, "memory.max", v))
			if _, err := os.Stat(filepath.Join(g.dirs[ControllerMemory], "memory.swap.max")); err == nil {
				errs = append(errs, w(ControllerMemory, "memory.swap.max", "0"))
			}
		} else {
			errs = append(errs, w(ControllerMemory, "memory.limit_in_bytes", v))
			if _, err := os.Stat(filepath.Join(g.dirs[ControllerMemory], "memory.memsw.limit_in_bytes")); err == nil {
				errs = append(errs, w(ControllerMemory, "memory.memsw.limit_in_bytes", v))
			}
		}
	}
	if l.Pids > 0 {
		errs = append(errs, w(ControllerPids, "pids.max", strconv.FormatUint(l.Pids, 10)))
	}
	return errors.Join(errs...)
}

// join moves pid into the cgroup (every hierarchy).
func (g *Cgroup) join(pid int) error {
	seen := map[string]bool{}
	for _, dir := range g.dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("%w: join %s: %v", ErrCgroup, dir, err)
		}
	}
	return nil
}

// CgroupEvents count what the limits of a cgroup did, since it was made.
type CgroupEvents struct {
	OOMKills    uint64 // processes the kernel killed for memory
	PidsRefused uint64 // forks refused at the pids limit
	Throttled   uint64 // CPU periods in which the quota stopped the sandbox
}

// Events reads the cgroup's counters.
func (g *Cgroup) Events() (CgroupEvents, error) {
	var e CgroupEvents
	var errs []error
	if dir, ok := g.dirs[ControllerMemory]; ok {
		file := "memory.oom_control"
		if g.version == CgroupV2 {
			file = "memory.events"
		}
		v, err := readKey(filepath.Join(dir, file), "oom_kill")
		e.OOMKills, errs = v, append(errs, err)
	}
	if dir, ok := g.dirs[ControllerPids]; ok {
		v, err := readKey(filepath.Join(dir, "pids.events"), "max")
		e.PidsRefused, errs = v, append(errs, err)
	}
	if dir, ok := g.dirs[ControllerCPU]; ok {
		v, err := readKey(filepath.Join(dir, "cpu.stat"), "nr_throttled")
		e.Throttled, errs = v, append(errs, err)
	}
	return e, errors.Join(errs...)
}

// readKey reads "key value" from a cgroup file of such lines.
func readKey(path, key string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCgroup, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: %s: %q: %v", ErrCgroup, path, line, err)
			}
			return n, nil
		}
	}
	return 0, nil // an older kernel without the counter
}

// Procs lists the host pids in the cgroup.
func (g *Cgroup) Procs() ([]int, error) {
	var out []int
	for _, dir := range g.dirs {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("%w: %v", ErrCgroup, err)
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Remove kills whatever is left in the cgroup and removes its directories.
// Removing a cgroup that is gone is not an error.
func (g *Cgroup) Remove() error {
	if pids, _ := g.Procs(); len(pids) > 0 {
		for _, pid := range pids {
			if pid == os.Getpid() {
				continue // a thread of ours starting a sandbox in it (see enter): it leaves by itself
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, dir := range g.dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		var err error
		for range 100 { // killed processes leave the cgroup as they are reaped
			if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) {
				break
			}
			sleepBrief()
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("%w: remove %s: %v", ErrCgroup, dir, err))
		}
	}
	return errors.Join(errs...)
}

// OpenCgroup names the existing cgroup id made by c.New, to read its events
// or remove it after a restart.
func (c *Cgroups) OpenCgroup(id string) *Cgroup {
	g := &Cgroup{version: c.version, dirs: map[string]string{}}
	for ctl, parent := range c.dirs {
		g.dirs[ctl] = filepath.Join(parent, id)
	}
	return g
}

func sleepBrief() { time.Sleep(10 * time.Millisecond) }
