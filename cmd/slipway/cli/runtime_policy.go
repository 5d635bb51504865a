package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// newCmdRuntimePolicy prints a runtime's policy view (GET /v1/policy).
func newCmdRuntimePolicy(g *globals) *cobra.Command {
	var server, tokenFile string
	cmd := &cobra.Command{
		Use:   "policy --runtime URL --token-file FILE",
		Short: "Show the config revision a runtime enforces, how old its view is, and the rules in effect",
		Long: `Policy asks a runtime (GET /v1/policy) which config repository revision it enforces, when it last
confirmed that revision current, whether claims are refused because the view is older than its
--max-staleness (and why), the last sync error, the verification policy in effect (source,
revision, keys, rules) and each pool's network rules and active generation.
It exits 3 when the view is stale.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if server == "" {
				return usage(errors.New("--runtime is required"))
			}
			tok, err := readToken(tokenFile)
			if err != nil {
				return err
			}
			c, err := runtimeapi.NewClient(server, tok)
			if err != nil {
				return usage(err)
			}
			v, err := c.Policy(cmd.Context())
			if err != nil {
				return err
			}
			if g.json() {
				if err := g.printJSON(v); err != nil {
					return err
				}
			} else {
				printPolicyView(g, v)
			}
			if v.Stale {
				return silent(3)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "runtime", "", "the runtime's API, e.g. http://127.0.0.1:7070")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the runtime API's bearer token")
	return cmd
}

func printPolicyView(g *globals, v *runtimeapi.PolicyView) {
	w := g.stdout
	rev := v.Revision
	if rev == "" {
		rev = "(none loaded)"
	}
	fmt.Fprintf(w, "revision:      %s\n", rev)
	if !v.ConfirmedAt.IsZero() {
		fmt.Fprintf(w, "confirmed:     %s (%s ago)\n", v.ConfirmedAt.Format(time.RFC3339), secs(v.AgeSeconds))
	}
	fmt.Fprintf(w, "max staleness: %s\n", secs(v.MaxStalenessSeconds))
	if v.Stale {
		fmt.Fprintf(w, "claims:        REFUSED (503): %s\n", v.ClaimsRefused)
	} else {
		fmt.Fprintf(w, "claims:        granted\n")
	}
	if v.LastSyncError != "" {
		fmt.Fprintf(w, "last sync:     failed: %s\n", v.LastSyncError)
	}
	ver := v.Verification
	fmt.Fprintf(w, "verification:  %s", ver.Source)
	if ver.Revision != "" {
		fmt.Fprintf(w, " at %s", ver.Revision)
	}
	if ver.Name != "" {
		fmt.Fprintf(w, " (policy %s; keys %s)", ver.Name, strings.Join(ver.Keys, ", "))
	}
	fmt.Fprintln(w)
	for _, r := range ver.Rules {
		var req []string
		if r.Signatures != nil {
			req = append(req, "signed by one of "+strings.Join(r.Signatures.Keys, ", "))
		}
		for _, a := range r.Attestations {
			req = append(req, "attestation "+a.Type+a.PredicateType)
		}
		if r.AllowUnverified {
			req = append(req, "nothing (allowUnverified)")
		}
		fmt.Fprintf(w, "  rule %s: kinds %v repositories %v: %s\n", r.Name, r.Match.Kinds, r.Match.Repositories, strings.Join(req, "; "))
	}
	for _, p := range v.Pools {
		net := p.Network.Mode
		if len(p.Network.Allow) > 0 {
			net += " " + strings.Join(p.Network.Allow, ",")
		}
		fmt.Fprintf(w, "pool %s:  network %s; active generation %s", p.Pool, net, orNone(p.ActiveGeneration))
		if p.PolicyPin != "" {
			fmt.Fprintf(w, "; policy pin %s", p.PolicyPin)
		}
		fmt.Fprintln(w)
		for gen, why := range p.Refused {
			fmt.Fprintf(w, "  refused %s: %s\n", gen, why)
		}
	}
	for rev, n := range v.Denials {
		fmt.Fprintf(w, "denials:       %g under %s\n", n, rev)
	}
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}
