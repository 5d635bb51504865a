package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// printJobCheckpoint ends job show's durable line: the workspace
// checkpoint cancellation step 6 published, with the run's durable head
// and the run manifest's checkpoint as the runtime answered them after the
// release, or that the job has no workspace checkpoint.
func printJobCheckpoint(w io.Writer, j *controlapi.Job) {
	c := j.Checkpoint
	if c == nil {
		fmt.Fprintln(w, "no workspace checkpoint (the workspace is deleted at release: nothing to restore, so no restore test)")
		return
	}
	const at = time.RFC3339
	fmt.Fprintf(w, "its workspace's checkpoint %s,\n          published by cancellation step 6 (run %s, sandbox %s, generation %s, runtime %s; taken %s at event %d of the job)\n",
		c.ID, c.RunID, c.SandboxID, c.Generation, c.Runtime, c.Created.Format(at), c.EventSeq)
	switch {
	case c.Manifest == "":
		fmt.Fprintf(w, "          run manifest: not read after the release\n")
	case c.Manifest == c.ID:
		fmt.Fprintf(w, "          run manifest: workspace_checkpoint_id %s (this checkpoint)\n", c.Manifest)
	default:
		fmt.Fprintf(w, "          run manifest: workspace_checkpoint_id %s, NOT this checkpoint\n", c.Manifest)
	}
	if c.HeadError != "" {
		fmt.Fprintf(w, "          head:     not read: %s\n", c.HeadError)
		return
	}
	same := "this checkpoint"
	if c.Head != c.ID {
		same = "NOT this checkpoint"
	}
	seq := fmt.Sprintf("at event %d of the job", c.HeadEventSeq)
	if c.HeadEventSeqUnknown {
		seq = "at an event sequence the runtime did not know (a rollout's drain took it)"
	}
	restore := "never proved"
	if !c.LastRestore.IsZero() {
		restore = "last proved " + c.LastRestore.Format(at) + " by " + c.LastRestoreBy
	}
	fmt.Fprintf(w, "          head:     %s (%s), taken %s %s; %s of run %s; restore %s (the runtime's answer at %s: slipway checkpoint durable %s asks it now)\n",
		orNone(c.Head), same, c.HeadCreated.Format(at), seq, plural(c.Checkpoints, "checkpoint", "checkpoints"), c.RunID, restore, c.ReadAt.Format(at), c.RunID)
}
