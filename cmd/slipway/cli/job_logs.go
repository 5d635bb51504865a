package cli

import (
	"encoding/json"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/spf13/cobra"
)

// newCmdJobLogs prints a job's event stream: stdout chunks to stdout,
// stderr chunks to stderr, states and notices to stderr; with -f it
// follows until the result, resuming by itself after a dropped connection
// without printing anything twice.
func newCmdJobLogs(g *globals, jf *jobFlags) *cobra.Command {
	var followFlag bool
	var after int64
	cmd := &cobra.Command{
		Use:   "logs [-f] ID",
		Short: "Print a job's output and states from its event stream; -f follows it to the end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := jf.client()
			if err != nil {
				return err
			}
			id, err := resolveJob(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			var final *controlapi.ResultData
			o := controlapi.FollowOptions{After: after, NoFollow: !followFlag,
				OnGap: func(d controlapi.TrimmedData) { fmt.Fprintf(g.stderr, "[%s]\n", d.Detail) }}
			err = c.Follow(cmd.Context(), id, o, func(e controlapi.Event) error {
				if g.json() {
					return g.printJSON(e)
				}
				switch e.Kind {
				case controlapi.KindStdout, controlapi.KindStderr:
					d, err := e.Output()
					if err != nil {
						return fmt.Errorf("event %d: %w", e.Seq, err)
					}
					w := g.stdout
					if e.Kind == controlapi.KindStderr {
						w = g.stderr
					}
					_, err = w.Write(d.Bytes())
					return err
				case controlapi.KindState:
					var d controlapi.StateData
					_ = json.Unmarshal(e.Data, &d)
					fmt.Fprintf(g.stderr, "[%s %s %s]\n", e.At.Format("15:04:05.000"), d.State, d.Reason)
					if d.State == controlapi.Unknown && followFlag {
						return errUnknownOutcome
					}
				case controlapi.KindResult:
					var d controlapi.ResultData
					_ = json.Unmarshal(e.Data, &d)
					final = &d
				case controlapi.KindStatus:
					var d struct {
						Argv   []string        `json:"argv"`
						Detail string          `json:"detail"`
						Source string          `json:"source"`
						Event  string          `json:"event"`
						Data   json.RawMessage `json:"data"`
					}
					_ = json.Unmarshal(e.Data, &d)
					switch {
					case d.Source == "workload": // the workload's own (slipway-runner event)
						fmt.Fprintf(g.stderr, "[workload %s %s]\n", d.Event, d.Data)
					case d.Argv != nil:
						fmt.Fprintf(g.stderr, "[$ %s]\n", shellWords(d.Argv))
					case d.Detail != "":
						fmt.Fprintf(g.stderr, "[%s]\n", d.Detail)
					}
				default:
					fmt.Fprintf(g.stderr, "[%s %s]\n", e.Kind, e.Data)
				}
				return nil
			})
			if err == errUnknownOutcome {
				return failed(fmt.Errorf("job %s: its outcome is unknown (see job show for the owner and deadline)", id))
			}
			if err != nil {
				return failed(err)
			}
			if final != nil && !g.json() {
				j := &controlapi.Job{ID: id, State: final.State, Reason: final.Reason, Detail: final.Detail, ExitCode: final.ExitCode}
				return jobExit(j)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&followFlag, "follow", "f", false, "follow the stream until the job's result (resumes by itself after a dropped connection)")
	cmd.Flags().Int64Var(&after, "after", 0, "start after this event sequence")
	jf.add(cmd)
	return cmd
}

var errUnknownOutcome = fmt.Errorf("unknown outcome")

func shellWords(argv []string) string {
	b, _ := json.Marshal(argv)
	return string(b)
}
