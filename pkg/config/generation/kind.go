package generation

import (
	"fmt"
	"slices"
	"strings"
)

// Kind is an artifact kind as a generation spells it: the camelCase key
// under pins.
type Kind string

// The nine artifact kinds, in the fixed order Kinds returns.
const (
	ControlPlane      Kind = "controlPlane"
	Runner            Kind = "runner"
	WorkspaceTemplate Kind = "workspaceTemplate"
	NodeImage         Kind = "nodeImage"
	RuntimeClass      Kind = "runtimeClass"
	Policy            Kind = "policy"
	Model             Kind = "model"
	PromptBundle      Kind = "promptBundle"
	SecretVersion     Kind = "secretVersion"
)

// Form is how a pin names its artifact: an image by digest, a git commit,
// or an opaque immutable id.
type Form string

// The three forms of a pin.
const (
	FormImage Form = "image"
	FormGit   Form = "git"
	FormID    Form = "id"
)

type kindInfo struct {
	kind     Kind
	artifact string
	forms    []Form
}

// kinds holds each kind's artifact-kind spelling (package policy's) and the
// forms its pin may take, the first being the usual one.
var kinds = []kindInfo{
	{ControlPlane, "control-plane", []Form{FormImage}},
	{Runner, "runner", []Form{FormImage}},
	{WorkspaceTemplate, "workspace-template", []Form{FormImage}},
	{NodeImage, "node-image", []Form{FormImage, FormID}},
	{RuntimeClass, "runtime-class", []Form{FormID}},
	{Policy, "policy", []Form{FormGit}},
	{Model, "model", []Form{FormID, FormImage}},
	{PromptBundle, "prompt-bundle", []Form{FormID, FormImage}},
	{SecretVersion, "secret-version", []Form{FormID}},
}

// Kinds returns the nine artifact kinds in their fixed order: the order of
// pins in a marshalled generation and of changes in a Diff.
func Kinds() []Kind {
	out := make([]Kind, len(kinds))
	for i, k := range kinds {
		out[i] = k.kind
	}
	return out
}

// ImageKinds returns the kinds whose pin must be an image by digest
// (controlPlane, runner, workspaceTemplate).
func ImageKinds() []Kind {
	var out []Kind
	for _, k := range kinds {
		if slices.Equal(k.forms, []Form{FormImage}) {
			out = append(out, k.kind)
		}
	}
	return out
}

// ParseKind accepts a kind in either spelling: camelCase as in a generation
// ("workspaceTemplate") or the artifact kind of a verification policy
// ("workspace-template").
func ParseKind(s string) (Kind, error) {
	for _, k := range kinds {
		if s == string(k.kind) || s == k.artifact {
			return k.kind, nil
		}
	}
	return "", fmt.Errorf("%w: unknown artifact kind %q (one of %s)", ErrInvalid, s, kindList())
}

// Valid reports whether k is one of the nine kinds.
func (k Kind) Valid() bool { return k.index() >= 0 }

// ArtifactKind is k as a verification policy spells it ("workspace-template");
// "" for an unknown kind.
func (k Kind) ArtifactKind() string {
	if i := k.index(); i >= 0 {
		return kinds[i].artifact
	}
	return ""
}

// Forms lists the forms a pin of kind k may take; nil for an unknown kind.
func (k Kind) Forms() []Form {
	if i := k.index(); i >= 0 {
		return slices.Clone(kinds[i].forms)
	}
	return nil
}

// index is k's position in Kinds, -1 when unknown.
func (k Kind) index() int {
	return slices.IndexFunc(kinds, func(e kindInfo) bool { return e.kind == k })
}

func kindList() string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k.kind)
	}
	return strings.Join(names, ", ")
}

func formList(fs []Form) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = string(f)
	}
	return strings.Join(names, " or ")
}
