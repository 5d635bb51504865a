package canary_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/canary"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// On a runtime that keeps checkpoints the round checkpoints, suspends and
// resumes its claim: the file it wrote is read back in the new sandbox,
// question 6 answers that the restore was proved (by the canary's run),
// and the release ends the claim in its new sandbox.
func TestRoundCheckpoints(t *testing.T) {
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.OpenStore(filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	w := newWorldWith(t, runtime.WithCheckpoints(runtime.Checkpoints{Store: st, Signer: sv, Verifier: v}))
	w.use(t, w.mk())
	c, err := canary.New(w.client, "agents")
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Round(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := "claim=pass identity=pass egress_approved=skipped egress_denied=skipped workspace=pass output=pass checkpoint=pass release=pass"
	if !r.Passed || steps(r) != want {
		t.Fatalf("round %s, want %s\n%+v", steps(r), want, r.Steps)
	}
	d, err := w.client.Durable(context.Background(), r.RunID)
	if err != nil || d.LastRestore == nil || d.LastRestore.Checkpoint != d.Head || d.Checkpoints != 1 {
		t.Fatalf("durable after the round: %+v, %v", d, err)
	}
	// The restore is recorded as what it is: the canary's proof.
	if d.LastRestore.By != runtimeapi.RestoredByCanary {
		t.Errorf("last restore recorded by %q, want %q", d.LastRestore.By, runtimeapi.RestoredByCanary)
	}
	if s := r.Steps[6]; !strings.Contains(s.Detail, d.Head) || !strings.Contains(s.Detail, "last restore proved by canary") {
		t.Errorf("checkpoint step: %+v", s)
	}
	// A client cannot record a restore as the drain's, nor as anything
	// unknown: 400 before the run is even looked up.
	for _, by := range []string{runtimeapi.RestoredByDrain, "operator"} {
		_, err := w.client.Resume(context.Background(), r.RunID, runtimeapi.ResumeBody{Token: "x", By: by})
		var ae *runtimeapi.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Reason, fmt.Sprintf("by %q", by)) {
			t.Errorf("resume by %q: %v, want 400 naming it", by, err)
		}
	}
}
