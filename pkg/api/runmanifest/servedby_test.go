package runmanifest_test

import (
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

func TestMismatches(t *testing.T) {
	pin := "registry.example/cp@sha256:" + strings.Repeat("1", 64)
	other := "mirror.example/cp@sha256:" + strings.Repeat("2", 64)
	same := "mirror.example/cp@sha256:" + strings.Repeat("1", 64) // another name, the same digest
	for name, c := range map[string]struct {
		served *runmanifest.Process
		pin    string
		want   int
	}{
		"no control plane":        {nil, pin, 0},
		"a host process":          {&runmanifest.Process{BinarySHA256: "sha256:x"}, pin, 0},
		"the pinned image":        {&runmanifest.Process{Image: pin}, pin, 0},
		"same digest, other name": {&runmanifest.Process{Image: same}, pin, 0},
		"no pin":                  {&runmanifest.Process{Image: other}, "", 0},
		"another image":           {&runmanifest.Process{Image: other}, pin, 1},
	} {
		m := &runmanifest.Manifest{ControlPlaneDigest: c.pin, ServedBy: runmanifest.ServedBy{ControlPlane: c.served}}
		if got := m.Mismatches(); len(got) != c.want {
			t.Errorf("%s: %v, want %d", name, got, c.want)
		}
	}
}

func TestSelf(t *testing.T) {
	t.Setenv("SLIPWAY_IMAGE", "not a digest")
	p, err := runmanifest.Self()
	if err == nil || !strings.Contains(err.Error(), "SLIPWAY_IMAGE") || p.Image != "" {
		t.Errorf("a malformed SLIPWAY_IMAGE: %+v %v", p, err)
	}
	if !strings.HasPrefix(p.BinarySHA256, "sha256:") || len(p.BinarySHA256) != 71 || p.Version == "" {
		t.Errorf("own identity: %+v", p)
	}
}
