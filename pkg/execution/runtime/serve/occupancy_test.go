package serve

import (
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// TestOccupancy: each Sandbox's state and since when, from the cluster's
// timestamps: a warm pool's member is warm idle from its creation; a
// claimed one active (for the claim's run) or proof from its claim's
// creation (never before its own); one scaled to zero retained from its
// Ready condition's last transition; a Sandbox of no warm pool and no
// claim is nobody's cost here.
func TestOccupancy(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 12, 6, 12, 0, s, 0, time.UTC) }
	sb := func(name, ctl string, created int) sandbox.Object {
		return sandbox.Object{Kind: sandbox.KindSandbox, Name: name, Pool: "agents", Generation: "g-1", Controller: ctl, Created: at(created)}
	}
	suspended := sb("kept", "SandboxWarmPool/wp", 1)
	suspended.Suspended, suspended.Transition = true, at(40)
	objs := []sandbox.Object{
		sb("idle", "SandboxWarmPool/wp", 1),
		sb("taken", "SandboxClaim/sw-r-1", 2),
		{Kind: sandbox.KindClaim, Name: "sw-r-1", Owner: "r-1", Bound: "taken", Created: at(30)},
		sb("proving", "SandboxClaim/sw-p-1", 20),
		{Kind: sandbox.KindClaim, Name: "sw-p-1", Owner: "p-1", Proof: true, Bound: "proving", Created: at(10)},
		suspended,
		sb("stray", "", 3),
		{Kind: sandbox.KindPod, Name: "idle", Controller: "Sandbox/idle", Created: at(1)},
	}
	got := occupancy(objs)
	want := map[string]cost.Entry{
		"idle":    {SandboxID: "idle", Pool: "agents", Generation: "g-1", State: cost.WarmIdle, At: at(1)},
		"taken":   {SandboxID: "taken", Pool: "agents", Generation: "g-1", State: cost.Active, RunID: "r-1", At: at(30)},
		"proving": {SandboxID: "proving", Pool: "agents", Generation: "g-1", State: cost.Proof, At: at(20)},
		"kept":    {SandboxID: "kept", Pool: "agents", Generation: "g-1", State: cost.Retained, At: at(40)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries: %+v", len(got), got)
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			t.Errorf("%s: %+v, want %+v", id, g, w)
		}
	}
}
