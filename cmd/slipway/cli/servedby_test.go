package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// A job through a real control plane and runtime records the processes
// that served it, as each measured itself: the control plane and the
// runtime (both this test binary, re-run as slipway) by the sha256 of
// their own executable, the control plane's declared image
// ($SLIPWAY_IMAGE), and the runner the sandbox ran. The control plane's
// image is not the generation's control-plane pin, so runs show warns.
func TestServedByRecordsProcesses(t *testing.T) {
	w := newControlWorld(t)
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	image := "registry.example/slipway/control@sha256:" + strings.Repeat("ab", 32)
	cp := w.startControlArgs(t, db, []string{"SLIPWAY_IMAGE=" + image}, "--runtime", "agents="+w.rt.base+","+w.rtTokenFile)
	tok := w.token(t, db, "acme")
	r := run(t, "", "job", "submit", "--server", cp.url, "--token-file", tok, "--pool", "agents", "--profile", "standard", "--wait", "-o", "json", "--", "true")
	var j controlapi.Job
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.RunID == "" {
		t.Fatalf("job: %+v", r)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, _ = io.Copy(h, f)
	f.Close()
	want := "sha256:" + hex.EncodeToString(h.Sum(nil))

	r = run(t, "", "runs", "show", j.RunID, "--state", filepath.Join(w.dir, "runtime-state"))
	var m runmanifest.Manifest
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("runs show: %v\n%+v", err, r)
	}
	sb := m.ServedBy
	switch {
	case sb.ControlPlane == nil || sb.Runtime == nil || sb.Runner == nil:
		t.Fatalf("served_by incomplete: %+v", sb)
	case sb.ControlPlane.BinarySHA256 != want || sb.Runtime.BinarySHA256 != want:
		t.Errorf("served_by binaries: control plane %s, runtime %s; the executable both ran is %s", sb.ControlPlane.BinarySHA256, sb.Runtime.BinarySHA256, want)
	case sb.ControlPlane.Image != image || sb.Runtime.Image != "":
		t.Errorf("served_by images: control plane %q (declared %q), runtime %q (declared none)", sb.ControlPlane.Image, image, sb.Runtime.Image)
	case sb.ControlPlane.Version == "" || sb.Runtime.Version == "":
		t.Errorf("served_by versions empty: %+v %+v", sb.ControlPlane, sb.Runtime)
	case sb.Runner.BinarySHA256 == "" || sb.Runner.BinarySHA256 != m.RunnerBinarySHA256:
		t.Errorf("served_by runner %q, the sandbox's runner reported %q", sb.Runner.BinarySHA256, m.RunnerBinarySHA256)
	}
	if m.ControlPlaneDigest == "" {
		t.Fatal("the world's generation pins no control plane")
	}
	if !strings.Contains(r.stderr, "warning: run "+j.RunID+": control plane ran from "+image+", the generation pins "+m.ControlPlaneDigest) {
		t.Errorf("runs show did not flag the control plane that differs from its pin: stderr %q", r.stderr)
	}
}
