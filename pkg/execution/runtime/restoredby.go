package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// ErrInvalidRestoreBy: a resume asks for its restore to be recorded as
// something a client cannot claim.
var ErrInvalidRestoreBy = errors.New("runtime: invalid restore reason")

// restoreBy is what a client's resume records its restore as: "" is the
// owner's resume; a canary round or a test says so; the drain's reason
// is the runtime's own.
func restoreBy(by string) (string, error) {
	switch by {
	case "", runtimeapi.RestoredByResume:
		return runtimeapi.RestoredByResume, nil
	case runtimeapi.RestoredByCanary, runtimeapi.RestoredByTest:
		return by, nil
	}
	return "", fmt.Errorf("%w: by %q: want %q, %q or %q", ErrInvalidRestoreBy, by,
		runtimeapi.RestoredByResume, runtimeapi.RestoredByCanary, runtimeapi.RestoredByTest)
}

// ResumeAs is Resume recording the verified restore as by (question 6's
// last restore): runtimeapi.RestoredByResume (also for ""),
// RestoredByCanary for a canary round's proof, RestoredByTest for a
// test's. Any other by is refused (ErrInvalidRestoreBy) before anything
// is done.
func (r *Runtime) ResumeAs(ctx context.Context, runID, token, by string) (*runtimeapi.Grant, error) {
	by, err := restoreBy(by)
	if err != nil {
		return nil, err
	}
	return r.resumeAs(ctx, runID, token, by)
}
