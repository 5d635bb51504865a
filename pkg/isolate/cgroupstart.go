package isolate

import (
	"os"
	"path/filepath"
	"runtime"
)

// Starting a sandbox inside its cgroup.
//
// Moving a running process into a cgroup v1 hierarchy (its pid written to
// cgroup.procs) write-locks the kernel's global threadgroup semaphore,
// which first waits for an RCU grace period: about 10 ms per sandbox on
// this project's hosts, during which the start waits (B11 measured it as
// most of what bounds add to a cold start). A thread that moves only
// itself (0 written to tasks) takes no such lock, and a child is born in
// the cgroups of the thread that forks it. So where this process may move
// its threads back home, Start's thread (locked to its goroutine) moves
// itself into the sandbox's cgroup, forks bwrap there and goes home before
// it runs anything else; bwrap is then in the cgroup from its first
// instruction, with no window at all. Elsewhere (cgroup v2, or no write
// access to this process's own cgroup) Start moves bwrap in after forking
// it, before bwrap reads its options.

// canReturnHome reports whether a thread of this process can move itself
// into home (this process's own cgroups, where its threads are: a move
// that changes nothing).
func canReturnHome(home map[string]string) bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread()
		err := moveThread(home)
		if err == nil {
			runtime.UnlockOSThread()
		} // else the thread may be half moved: it ends with this goroutine
		ok <- err == nil
	}()
	return <-ok
}

// moveThread moves the calling thread into dirs (cgroup v1 directories).
func moveThread(dirs map[string]string) error {
	seen := map[string]bool{}
	for _, dir := range dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if err := os.WriteFile(filepath.Join(dir, "tasks"), []byte("0"), 0); err != nil {
			return err
		}
	}
	return nil
}

// enter moves the calling thread, locked to its goroutine, into g, so
// that what it forks is born there. ok is false when it did not (no home
// to go back to, or a move failed: the thread then went home), stuck
// when the thread could not go home: then it must not run anything else
// and ends with its goroutine (see Process.run).
func (g *Cgroup) enter() (ok, stuck bool) {
	if g.home == nil {
		return false, false
	}
	if err := moveThread(g.dirs); err != nil {
		return false, g.leave() != nil
	}
	return true, false
}

// leave moves the calling thread back to this process's own cgroups.
func (g *Cgroup) leave() error { return moveThread(g.home) }
