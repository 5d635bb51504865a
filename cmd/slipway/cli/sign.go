package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/slipway-dev/slipway/internal/atomicfile"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// passwordEnv is where key passwords come from, as with cosign.
const passwordEnv = "COSIGN_PASSWORD"

func keyPassword() ([]byte, error) {
	pw, ok := os.LookupEnv(passwordEnv)
	if !ok {
		return nil, fmt.Errorf("%s is not set: the key password comes from the environment", passwordEnv)
	}
	return []byte(pw), nil
}

// signFlags are the flags of every command that signs.
type signFlags struct {
	key          string
	offlineNoLog bool
}

func (f *signFlags) add(fs *pflag.FlagSet, keyFlag string) {
	fs.StringVar(&f.key, keyFlag, "", "cosign private key file (password from $"+passwordEnv+") or KMS key URI")
	fs.BoolVar(&f.offlineNoLog, "offline-no-tlog", false, "sign without a transparency log (none is reachable here); required, so the choice is visible")
}

// options checks the flags and returns package sign's options.
func (f *signFlags) options(keyFlag string) ([]sign.Option, error) {
	if f.key == "" {
		return nil, usage(fmt.Errorf("--%s is required", keyFlag))
	}
	if !f.offlineNoLog {
		return nil, usage(errors.New("no transparency log is reachable here: pass --offline-no-tlog to sign without one (and verify with a policy whose transparencyLog is none)"))
	}
	return []sign.Option{sign.WithOfflineNoTlog()}, nil
}

// NewCmdKeys groups key commands.
func NewCmdKeys(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Make signing keys"}
	cmd.AddCommand(newCmdKeysGenerate(g))
	return cmd
}

func newCmdKeysGenerate(g *globals) *cobra.Command {
	var prefix string
	var force bool
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Generate a cosign-compatible key pair (PREFIX.key encrypted with $" + passwordEnv + ", PREFIX.pub)",
		Example: `  COSIGN_PASSWORD=... slipway keys generate --output-key-prefix release
  cosign verify --key release.pub ...   # the cosign CLI reads the same files`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pw, err := keyPassword()
			if err != nil {
				return usage(err)
			}
			if len(pw) == 0 {
				return usage(fmt.Errorf("%s is empty: an unencrypted signing key is not made", passwordEnv))
			}
			keyFile, pubFile := prefix+".key", prefix+".pub"
			if !force {
				for _, f := range []string{keyFile, pubFile} {
					if _, err := os.Lstat(f); err == nil {
						return usage(fmt.Errorf("%s exists; use --force to replace it", f))
					}
				}
			}
			priv, pub, err := sign.GenerateKeys(pw)
			if err != nil {
				return usage(err)
			}
			if dir := filepath.Dir(keyFile); dir != "." {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return usage(err)
				}
			}
			if err := atomicfile.Write(keyFile, priv, 0o600); err != nil {
				return usage(err)
			}
			if err := atomicfile.Write(pubFile, pub, 0o644); err != nil {
				return usage(err)
			}
			if g.json() {
				return g.printJSON(map[string]string{"privateKey": keyFile, "publicKey": pubFile})
			}
			fmt.Fprintf(g.stdout, "%s\n%s\n", keyFile, pubFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "output-key-prefix", "cosign", "write PREFIX.key and PREFIX.pub")
	cmd.Flags().BoolVar(&force, "force", false, "replace existing key files")
	return cmd
}

// digestArg parses the digest reference sign and attest take; given a tag,
// it says how to get the digest.
func digestArg(s string) (name.Digest, error) {
	d, err := sign.ParseDigest(s)
	if err == nil {
		return d, nil
	}
	if _, terr := name.NewTag(s); terr == nil && !strings.Contains(s, "@") {
		return name.Digest{}, usage(fmt.Errorf("%w: %q is a tag, and only a digest is signed (a tag may move): run 'slipway resolve %s' for its digest, then give that", sign.ErrInput, s, s))
	}
	return name.Digest{}, usage(err)
}

// NewCmdSign signs an image digest.
func NewCmdSign(g *globals) *cobra.Command {
	var sf signFlags
	var annotations, attests []string
	cmd := &cobra.Command{
		Use:   "sign REF@DIGEST",
		Short: "Sign an image by digest with a cosign key, the way cosign does (sha256-<hex>.sig)",
		Long: `Sign appends a cosign signature for the digest to the image's sha256-<hex>.sig tag,
does nothing if this key already signed it, and reads the signature back and
verifies it before it exits. Only digest references are signed: pin tags first.
--attest TYPE=FILE also attaches attestations (as "slipway attest" does) in the same run,
concurrently with the signature.`,
		Example: `  COSIGN_PASSWORD=... slipway sign 127.0.0.1:5000/templates/minimal@sha256:... --key cosign.key --offline-no-tlog
  COSIGN_PASSWORD=... slipway sign REF@sha256:... --key cosign.key --offline-no-tlog --attest slsaprovenance=provenance.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := sf.options("key")
			if err != nil {
				return err
			}
			d, err := digestArg(args[0])
			if err != nil {
				return err
			}
			ann, err := parseAnnotations(annotations)
			if err != nil {
				return err
			}
			var stmts [][]byte
			for _, a := range attests {
				typ, file, ok := strings.Cut(a, "=")
				if !ok {
					return usage(fmt.Errorf("--attest %q: want TYPE=FILE", a))
				}
				st, err := statementFor(d, typ, file)
				if err != nil {
					return err
				}
				stmts = append(stmts, st)
			}
			sv, err := sign.LoadSignerRef(cmd.Context(), sf.key, keyPassword)
			if err != nil {
				return usage(err)
			}
			res, atts, err := sign.SignAndAttest(cmd.Context(), d, sv, stmts, append(opts, sign.WithAnnotations(ann))...)
			if err != nil {
				return signError(err)
			}
			if g.json() {
				out := map[string]any{"ref": res.Ref.String(), "signatureTag": res.SignatureTag.String(), "status": res.Status, "tlog": res.Tlog, "verified": res.Verified}
				var aj []map[string]any
				for _, a := range atts {
					aj = append(aj, map[string]any{"attestationTag": a.AttestationTag.String(), "predicateType": a.PredicateType, "status": a.Status, "verified": a.Verified})
				}
				if len(aj) > 0 {
					out["attestations"] = aj
				}
				return g.printJSON(out)
			}
			fmt.Fprintf(g.stdout, "%s %s %s\n", res.Status, res.Ref, res.SignatureTag)
			for _, a := range atts {
				fmt.Fprintf(g.stdout, "%s %s %s %s\n", a.Status, a.Ref, a.PredicateType, a.AttestationTag)
			}
			return nil
		},
	}
	sf.add(cmd.Flags(), "key")
	cmd.Flags().StringArrayVarP(&annotations, "annotation", "a", nil, "extra claim in the signed payload: KEY=VALUE")
	cmd.Flags().StringArrayVar(&attests, "attest", nil, "also attach an attestation: TYPE=FILE (slsaprovenance, spdx, cyclonedx or a URI; a predicate JSON file)")
	return cmd
}

func parseAnnotations(specs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range specs {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, usage(fmt.Errorf("--annotation %q: want KEY=VALUE", s))
		}
		out[k] = v
	}
	return out, nil
}

// signError maps package sign's errors to exit codes: a refused
// verification is 1, everything else (input, key, registry) is 2.
func signError(err error) error {
	if errors.Is(err, sign.ErrVerification) {
		return failed(err)
	}
	return usage(err)
}

// predicateTypes maps --type to predicate types (cosign's names, and a URI
// for anything else).
var predicateTypes = map[string]string{
	"slsaprovenance":  attest.PredicateSLSAProvenanceV1,
	"slsaprovenance1": attest.PredicateSLSAProvenanceV1,
	"spdx":            attest.PredicateSPDX,
	"spdxjson":        attest.PredicateSPDX,
	"cyclonedx":       attest.PredicateCycloneDX,
}

// statementFor reads the predicate file and wraps it in an in-toto
// statement about d; typ is a --type value.
func statementFor(d name.Digest, typ, predicate string) ([]byte, error) {
	pt, ok := predicateTypes[typ]
	if !ok {
		if !strings.Contains(typ, "://") {
			return nil, usage(fmt.Errorf("type %q: want slsaprovenance, spdx, cyclonedx or a predicate type URI", typ))
		}
		pt = typ
	}
	if predicate == "" {
		return nil, usage(errors.New("a predicate file is required"))
	}
	body, err := os.ReadFile(predicate)
	if err != nil {
		return nil, usage(err)
	}
	st, err := attest.New(d.Context().Name(), d.DigestStr(), pt, body)
	if err != nil {
		return nil, usage(fmt.Errorf("%s: %w", predicate, err))
	}
	stmt, err := attest.Marshal(st)
	if err != nil {
		return nil, usage(err)
	}
	return stmt, nil
}

// NewCmdAttest attaches an in-toto attestation.
func NewCmdAttest(g *globals) *cobra.Command {
	var sf signFlags
	var typ, predicate string
	cmd := &cobra.Command{
		Use:   "attest REF@DIGEST",
		Short: "Attach a signed in-toto attestation (DSSE) to an image digest, the way cosign attest does",
		Long: `Attest wraps the predicate in an in-toto Statement v1 whose subject is the digest,
signs it as a DSSE envelope and appends it to the image's sha256-<hex>.att tag.
--type is slsaprovenance (SLSA provenance v1), spdx, cyclonedx, or a predicate type URI;
the predicate is checked against its type. The attestation is read back and verified.`,
		Example: `  COSIGN_PASSWORD=... slipway attest REF@sha256:... --key cosign.key --type slsaprovenance --predicate provenance.json --offline-no-tlog`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := sf.options("key")
			if err != nil {
				return err
			}
			d, err := digestArg(args[0])
			if err != nil {
				return err
			}
			stmt, err := statementFor(d, typ, predicate)
			if err != nil {
				return err
			}
			sv, err := sign.LoadSignerRef(cmd.Context(), sf.key, keyPassword)
			if err != nil {
				return usage(err)
			}
			res, err := sign.Attest(cmd.Context(), d, sv, stmt, opts...)
			if err != nil {
				return signError(err)
			}
			if g.json() {
				return g.printJSON(map[string]any{"ref": res.Ref.String(), "attestationTag": res.AttestationTag.String(), "predicateType": res.PredicateType, "status": res.Status, "tlog": res.Tlog, "verified": res.Verified})
			}
			fmt.Fprintf(g.stdout, "%s %s %s %s\n", res.Status, res.Ref, res.PredicateType, res.AttestationTag)
			return nil
		},
	}
	sf.add(cmd.Flags(), "key")
	cmd.Flags().StringVar(&typ, "type", "", "slsaprovenance, spdx, cyclonedx, or a predicate type URI")
	cmd.Flags().StringVar(&predicate, "predicate", "", "JSON file holding the predicate")
	return cmd
}

// NewCmdVerify verifies an artifact against a VerificationPolicy.
func NewCmdVerify(g *globals) *cobra.Command {
	var policyFile, kind string
	cmd := &cobra.Command{
		Use:   "verify REF --policy FILE",
		Short: "Verify an image against a verification policy (signatures, required attestations), by digest",
		Long: `Verify checks REF against a VerificationPolicy: which keys must have signed it, which
attestations it must carry (SLSA provenance from a given builder and build type, an SBOM),
and whether a tag may stand in for a digest. It prints every check with its reason.
Exit 0 verified, 1 refused (the failed checks are printed), 2 usage or I/O errors.`,
		Example: `  slipway verify 127.0.0.1:5000/templates/minimal@sha256:... --policy policies/verification.yaml --kind workspace-template`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if policyFile == "" {
				return usage(errors.New("--policy is required"))
			}
			p, err := policy.Load(policyFile)
			if err != nil {
				return usage(err)
			}
			res, err := p.Verify(cmd.Context(), policy.Target{Ref: args[0], Kind: kind})
			if err != nil {
				return usage(err)
			}
			if err := g.ci(verifyStep(res)); err != nil {
				return err
			}
			if g.json() {
				if err := g.printJSON(res); err != nil {
					return err
				}
			} else {
				printResult(g, res)
			}
			if !res.Verified {
				return silent(exitFailed)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&policyFile, "policy", "", "VerificationPolicy file")
	cmd.Flags().StringVar(&kind, "kind", "", "artifact kind ("+strings.Join(policy.Kinds, ", ")+")")
	return cmd
}

func printResult(g *globals, res *policy.Result) {
	verdict := "verified"
	if !res.Verified {
		verdict = "REFUSED"
	}
	target := res.Ref
	if res.Digest != "" && !strings.HasSuffix(target, res.Digest) {
		target += " (" + res.Digest + ")"
	}
	fmt.Fprintf(g.stdout, "%s %s against policy %s\n", verdict, target, res.Policy)
	for _, c := range res.Checks {
		mark := "ok  "
		if !c.Passed {
			mark = "FAIL"
		}
		name := c.Name
		if c.Rule != "" {
			name = c.Rule + "/" + c.Name
		}
		fmt.Fprintf(g.stdout, "  %s %s: %s\n", mark, name, c.Reason)
	}
}
