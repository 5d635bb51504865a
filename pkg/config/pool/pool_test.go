package pool_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/pool"
)

func TestDefaultRoundTrip(t *testing.T) {
	b, err := pool.Marshal(pool.Default("agents"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.ParsePool(b, "pool.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if p.Metadata.Name != "agents" || p.Spec.ReadyTimeout.Duration != 30*time.Second || p.Spec.Network.Mode != "deny" || len(p.Spec.RequiredKinds) != 3 {
		t.Errorf("parsed %+v", p)
	}
	again, _ := pool.Marshal(p)
	if string(again) != string(b) {
		t.Errorf("not stable:\n%s\n---\n%s", b, again)
	}
	s := pool.NewState("agents")
	sb, _ := pool.Marshal(s)
	if _, err := pool.ParseState(sb, "desired.yaml"); err != nil {
		t.Fatalf("%v\n%s", err, sb)
	}
}

func TestPoolRefusals(t *testing.T) {
	good, _ := pool.Marshal(pool.Default("agents"))
	for name, tc := range map[string]struct {
		from, to string
		line     int
		msg      string
	}{
		"unknown field":  {"warmSize: 2", "warmSize: 2\n  warmsize: 3", 0, "unknown field \"warmsize\""},
		"bad kind":       {"- controlPlane", "- controlplane", 0, `unknown kind "controlplane"`},
		"bad duration":   {"readyTimeout: 30s", "readyTimeout: soon", 0, "not a duration"},
		"bad drain mode": {"onDrainDeadline: wait", "onDrainDeadline: maybe", 0, "want wait, stop or checkpoint"},
		"bad proof":      {"- cleanup", "- vibes", 0, `unknown proof "vibes"`},
		"bad name":       {"name: agents", "name: Agents", 0, "not a pool name"},
		"bad node label": {"warmSize: 2", "warmSize: 2\n  kubernetes: {nodeImageLabel: \"slipway.dev/node image\"}", 0, "spec.kubernetes.nodeImageLabel"},
		"unknown k8s":    {"warmSize: 2", "warmSize: 2\n  kubernetes: {nodeImageLabels: x}", 0, "unknown field \"nodeImageLabels\""},
	} {
		t.Run(name, func(t *testing.T) {
			in := strings.Replace(string(good), tc.from, tc.to, 1)
			if in == string(good) {
				t.Fatalf("%q not in\n%s", tc.from, good)
			}
			_, err := pool.ParsePool([]byte(in), "pools/agents/pool.yaml")
			if !errors.Is(err, pool.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "pools/agents/pool.yaml:") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestNodeImageLabel(t *testing.T) {
	good, _ := pool.Marshal(pool.Default("agents"))
	in := strings.Replace(string(good), "warmSize: 2", "warmSize: 2\n  kubernetes:\n    nodeImageLabel: slipway.dev/node-image", 1)
	p, err := pool.ParsePool([]byte(in), "pools/agents/pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.Kubernetes == nil || p.Spec.Kubernetes.NodeImageLabel != "slipway.dev/node-image" {
		t.Fatalf("kubernetes = %+v", p.Spec.Kubernetes)
	}
	for k, want := range map[string]bool{"node-image": true, "a.b/c_d.e": true, "A/b": false, "/x": false, "a/": false, "a/b/c": false} {
		if got := pool.ValidLabelKey(k); got != want {
			t.Errorf("ValidLabelKey(%q) = %v, want %v", k, got, want)
		}
	}
}

func TestStateRefusals(t *testing.T) {
	base := "apiVersion: slipway.dev/v1alpha1\nkind: PoolState\npool: agents\ngenerations:\n"
	for name, tc := range map[string]struct{ body, msg string }{
		"two active": {base + "  - {id: g-a, sequence: 1, state: active, warmSize: 1, since: 2026-11-29T00:00:00Z}\n  - {id: g-b, sequence: 2, state: active, warmSize: 1, since: 2026-11-29T00:00:00Z}\n", "at most one"},
		"bad state":  {base + "  - {id: g-a, sequence: 1, state: live, warmSize: 1, since: 2026-11-29T00:00:00Z}\n", `"live"`},
		"bad id":     {base + "  - {id: a, sequence: 1, state: active, warmSize: 1, since: 2026-11-29T00:00:00Z}\n", "not a generation id"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.ParseState([]byte(tc.body), "desired.yaml")
			if !errors.Is(err, pool.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "desired.yaml:5:") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// ReadPool and ReadState read through a tree's ReadFile (here a map): a
// missing desired.yaml is a pool with nothing promoted, a missing pool.yaml
// is an error that says so, and a bad file is named.
func TestReadPoolAndState(t *testing.T) {
	files := map[string][]byte{}
	read := func(p string) ([]byte, error) {
		b, ok := files[p]
		if !ok {
			return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
		}
		return b, nil
	}
	if _, err := pool.ReadPool("agents", read); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadPool without pool.yaml: %v", err)
	}
	st, err := pool.ReadState("agents", read)
	if err != nil || st.Pool != "agents" || len(st.Generations) != 0 {
		t.Errorf("ReadState without desired.yaml = %+v, %v", st, err)
	}
	files[pool.PoolFile("agents")], _ = pool.Marshal(pool.Default("agents"))
	if p, err := pool.ReadPool("agents", read); err != nil || p.Metadata.Name != "agents" {
		t.Errorf("ReadPool = %+v, %v", p, err)
	}
	files[pool.StateFile("agents")] = []byte("kind: PoolState\nbogus: 1\n")
	if _, err := pool.ReadState("agents", read); err == nil || !strings.Contains(err.Error(), pool.StateFile("agents")) {
		t.Errorf("ReadState of a bad desired.yaml: %v", err)
	}
	broken := errors.New("disk on fire")
	if _, err := pool.ReadState("agents", func(string) ([]byte, error) { return nil, broken }); !errors.Is(err, broken) {
		t.Errorf("ReadState when read fails: %v", err)
	}
}
