package canary_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/canary"
)

// A history keeps the newest rounds, at most its maximum; ReadHistory
// returns the last n of them, oldest first.
func ExampleHistory() {
	dir, _ := os.MkdirTemp("", "canary")
	defer os.RemoveAll(dir)
	h, _ := canary.NewHistory(filepath.Join(dir, "canary.jsonl"), 3)
	for i, step := range []string{"", "", canary.StepDenied, "", canary.StepClaim} {
		r := &canary.Round{Pool: "agents", Started: time.Unix(int64(i), 0), Passed: step == "", FailedStep: step, RunID: fmt.Sprintf("r-%d", i)}
		if err := h.Append(r); err != nil {
			fmt.Println(err)
		}
	}
	rounds, _, _ := canary.ReadHistory(h.Path(), 2)
	for _, r := range rounds {
		if r.Passed {
			fmt.Println(r.RunID, "passed")
		} else {
			fmt.Println(r.RunID, "failed at", r.FailedStep)
		}
	}
	all, _, _ := canary.ReadHistory(h.Path(), 0)
	fmt.Println(len(all), "rounds kept")
	// Output:
	// r-3 passed
	// r-4 failed at claim
	// 3 rounds kept
}
