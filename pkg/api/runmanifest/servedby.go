package runmanifest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/internal/version"
)

// Process is what a Slipway process reports of itself: its version, the
// sha256 of the executable it runs (read from its own /proc/self/exe), and
// the image it runs from when its install declares one (a reference by
// digest). A runtime replica that shares its run store with others also
// reports Address, where they reach its API (its pod's address): the one
// that granted a claim, or moved it last, holds it.
type Process struct {
	Version      string `json:"version"`
	BinarySHA256 string `json:"binary_sha256"`
	Image        string `json:"image,omitempty"`
	Address      string `json:"address,omitempty"`
}

// ServedBy are the processes that served a run: the control plane that
// dispatched it (as it reported itself in the claim; nil for a claim made
// straight to the runtime), the runtime that granted it, and the runner in
// its sandbox (the binary the runtime measured in the sandbox).
type ServedBy struct {
	ControlPlane *Process `json:"control_plane,omitempty"`
	Runtime      *Process `json:"runtime,omitempty"`
	Runner       *Process `json:"runner,omitempty"`
}

// Mismatches lists where the processes that served m differ from m's pins:
// a control plane whose image is not the generation's control-plane pin.
// (A runner whose binary is not the one its pinned image carries never
// serves: the runtime refuses it at start.) Empty when they agree or when
// a side is unknown (a process on a host declares no image).
func (m *Manifest) Mismatches() []string {
	var out []string
	if cp := m.ServedBy.ControlPlane; cp != nil && cp.Image != "" && m.ControlPlaneDigest != "" && digestOf(cp.Image) != digestOf(m.ControlPlaneDigest) {
		out = append(out, fmt.Sprintf("control plane ran from %s, the generation pins %s", cp.Image, m.ControlPlaneDigest))
	}
	return out
}

// digestOf is the sha256:<hex> part of a reference, or the reference.
func digestOf(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// Self is this process as it measures itself: its version, the sha256 of
// its own executable and the image its install declares ($SLIPWAY_IMAGE,
// by digest). What cannot be read is left empty, and the error says why.
func Self() (Process, error) {
	p := Process{Version: version.Get().Version}
	sum, err1 := version.ExecutableSHA256()
	if sum != "" {
		p.BinarySHA256 = "sha256:" + sum
	}
	img, err2 := version.Image()
	p.Image = img
	return p, errors.Join(err1, err2)
}
