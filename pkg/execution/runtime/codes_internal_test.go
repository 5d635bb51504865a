package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// TestErrorCodes: each sentinel's answer carries its runtimeapi code,
// wrapped or not, and its reason whole; other errors get the status's
// code, and an internal one (500, 502, 503 without a sentinel) only a
// reason and an error id, the detail going to the log.
func TestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		status int
		err    error
		want   string
	}{
		{http.StatusServiceUnavailable, fmt.Errorf("pool agents: %w", ErrStale), runtimeapi.CodeStale},
		{http.StatusConflict, ErrNoActive, runtimeapi.CodeNoActiveGeneration},
		{http.StatusConflict, ErrRequestKeyUsed, runtimeapi.CodeRequestKeyUsed},
		{http.StatusNotFound, fmt.Errorf("%w: %q", ErrNoPool, "x"), runtimeapi.CodeNoPool},
		{http.StatusNotFound, ErrNoClaim, runtimeapi.CodeNoClaim},
		{http.StatusConflict, ErrFenced, runtimeapi.CodeFenced},
		{http.StatusConflict, ErrProofRefused, runtimeapi.CodeProofRefused},
		{http.StatusNotFound, runs.ErrNotFound, runtimeapi.CodeNotFound},
		{http.StatusBadRequest, ErrRequestKeyInvalid, runtimeapi.CodeInvalid},
		{http.StatusBadRequest, errors.New("request body: EOF"), runtimeapi.CodeInvalid},
		{http.StatusConflict, fmt.Errorf("%w: resume run r-1", ErrNotSuspended), runtimeapi.CodeNotSuspended},
		{http.StatusBadRequest, fmt.Errorf("%w: reason: required (say why)", ErrActionInput), runtimeapi.CodeInvalid},
		{http.StatusInternalServerError, fmt.Errorf("%w: pools/agents/pool.yaml: spec.limits sets memory", ErrUnenforceable), runtimeapi.CodeInternal},
		{http.StatusInternalServerError, errors.New("write /srv/state/disk: no space left"), runtimeapi.CodeInternal},
		{http.StatusBadGateway, errors.New("git: no answer from /srv/state/config-cache"), runtimeapi.CodeInternal},
		{http.StatusServiceUnavailable, errors.New("bwrap --bind /srv/state/sandboxes/x: exit 1"), runtimeapi.CodeInternal},
	} {
		var log bytes.Buffer
		s := &Server{rt: NewRuntime(nil, nil, nil, 0, WithLog(&log))}
		rec := httptest.NewRecorder()
		s.writeError(rec, httptest.NewRequest("POST", "/v1/x", nil), tc.status, tc.err)
		if rec.Code != tc.status {
			t.Errorf("%v: status %d", tc.err, rec.Code)
		}
		var body runtimeapi.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code != tc.want {
			t.Errorf("%v: body %s (%v), want code %s", tc.err, rec.Body, err, tc.want)
		}
		if tc.want != runtimeapi.CodeInternal || errors.Is(tc.err, ErrUnenforceable) {
			if body.Error != tc.err.Error() || body.ID != "" || log.Len() != 0 {
				t.Errorf("%v: body %+v, log %q", tc.err, body, log.String())
			}
			continue
		}
		if body.ID == "" || body.Error != "internal error (error id "+body.ID+")" || strings.Contains(rec.Body.String(), "/srv/state") {
			t.Errorf("%v: body %s", tc.err, rec.Body)
		}
		if want := fmt.Sprintf("runtime: error %s: POST /v1/x: %d: %v\n", body.ID, tc.status, tc.err); log.String() != want {
			t.Errorf("log %q, want %q", log.String(), want)
		}
	}
}

// The API's limits are the runner's.
func TestAPILimitsAreTheRunners(t *testing.T) {
	if runtimeapi.MaxOutputLimit != runner.MaxOutputLimit || runtimeapi.StreamStdout != runner.StreamStdout ||
		runtimeapi.StreamStderr != runner.StreamStderr || runtimeapi.MaxFrameBytes < 2*runner.MaxFrameBytes {
		t.Fatalf("runtimeapi's limits differ from the runner's")
	}
}
