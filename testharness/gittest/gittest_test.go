package gittest_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/need"
)

func TestCloneAndPushOverHTTP(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"pools/a/pool.yaml": "kind: Pool\n"})
	work := filepath.Join(t.TempDir(), "w")
	gittest.Git(t, "", "clone", "--quiet", url, work)
	if got := gittest.Git(t, work, "show", "HEAD:pools/a/pool.yaml"); got != "kind: Pool" {
		t.Fatalf("cloned content %q", got)
	}
	gittest.Git(t, work, "commit", "--quiet", "--allow-empty", "-m", "second")
	gittest.Git(t, work, "push", "--quiet", "origin", "main")
	if s.Pushes() != 1 {
		t.Errorf("pushes = %d, want 1", s.Pushes())
	}
	if got := gittest.Git(t, s.Dir("config.git"), "log", "--format=%s", "main"); got != "second\nseed" {
		t.Errorf("log = %q", got)
	}

	s.ReadOnly("config.git", true)
	gittest.Git(t, work, "commit", "--quiet", "--allow-empty", "-m", "third")
	if _, err := gittest.Run(work, "push", "--quiet", "origin", "main"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("push to a read-only repo: %v, want a 403", err)
	}
}

// ListenAlso serves the same repositories on another address of the
// machine: a clone from there has the seeded commit, and loopback is
// refused as that address.
func TestListenAlso(t *testing.T) {
	ip := hostAddress(t)
	s := gittest.NewServer(t, gittest.ListenAlso(ip))
	s.Seed(t, "config.git", "main", map[string]string{"pools/a/pool.yaml": "kind: Pool\n"})
	url := s.URLAlso("config.git")
	if !strings.HasPrefix(url, "http://"+ip+":") {
		t.Fatalf("URLAlso = %q, want one at %s", url, ip)
	}
	work := filepath.Join(t.TempDir(), "w")
	gittest.Git(t, "", "clone", "--quiet", url, work)
	if got := gittest.Git(t, work, "show", "HEAD:pools/a/pool.yaml"); got != "kind: Pool" {
		t.Fatalf("cloned from %s: content %q", url, got)
	}
	if gittest.NewServer(t).URLAlso("config.git") != "" {
		t.Error("URLAlso without ListenAlso names a URL")
	}
	if err := gittest.ListenAlso("127.0.0.1")(nil); err == nil || !strings.Contains(err.Error(), `"127.0.0.1"`) {
		t.Errorf("ListenAlso(127.0.0.1): %v, want an error naming the address", err)
	}
}

// hostAddress is an IPv4 address of this machine other than loopback.
func hostAddress(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	need.Missing(t, "no IPv4 address of this machine other than loopback: %v", addrs)
	return ""
}
