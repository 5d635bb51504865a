package runtime

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// TestErrorCodes: each sentinel's answer carries its runtimeapi code,
// wrapped or not; other errors get the status's code.
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
		{http.StatusInternalServerError, errors.New("disk full"), runtimeapi.CodeInternal},
		{http.StatusBadGateway, errors.New("git: no answer"), runtimeapi.CodeInternal},
	} {
		rec := httptest.NewRecorder()
		writeError(rec, tc.status, tc.err)
		if rec.Code != tc.status {
			t.Errorf("%v: status %d", tc.err, rec.Code)
		}
		want := fmt.Sprintf(`{"error":%q,"code":%q}`+"\n", tc.err.Error(), tc.want)
		if rec.Body.String() != want {
			t.Errorf("%v: body %s, want %s", tc.err, rec.Body, want)
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
