package console

import (
	"fmt"
	"html"
	"html/template"
	"net/url"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// LineagePackages is how many packages of each artifact a lineage graph
// draws; a node after them counts them all and links the full list.
const LineagePackages = 5

// node is one box of a lineage graph.
type node struct {
	label, value, href string
}

// Lineage draws a run's lineage as inline SVG, server side: the run in the
// middle column, what it ran in (sandbox, attempt, generation, pool,
// tenant) on the left, what it was made of (each artifact's digest, the
// policy revisions, the secret version, the processes that served it) on
// the right, an edge from the run to each. Below the artifacts come, for
// each of them, who built it and its packages, as the run's runtime
// recorded them (pk, from their verified SLSA provenance and SBOM
// attestations; nil when the runtime did not answer): each builder (or
// "no provenance"), then the first LineagePackages packages, each linking
// the runs that share it, then their count linking the full list. Every value comes from the manifest or the
// index, cleaned (Clean) and escaped.
func Lineage(m *runmanifest.Manifest, pk *runtimeapi.RunPackages) template.HTML {
	left := []node{
		{"sandbox", m.SandboxID, ""},
		{"allocation attempt", fmt.Sprint(m.AllocationAttempt), ""},
		{"generation", m.Generation, ""},
		{"pool", m.Pool, ""},
		{"tenant", m.Tenant, ""},
		{"node", m.NodeID, ""},
	}
	var right []node
	add := func(label, v string) {
		if v != "" {
			right = append(right, node{label, v, ""})
		}
	}
	add("workspace template", m.WorkspaceTemplateID)
	add("runner image", m.RunnerImageDigest)
	add("runner binary", m.RunnerBinarySHA256)
	add("control plane image", m.ControlPlaneDigest)
	add("node image", m.NodeImageID)
	add("runtime class", m.RuntimeClass)
	add("policy revision", m.PolicyRevision)
	add("verification policy", m.VerificationPolicyRevision)
	add("model", m.ModelID)
	add("prompt bundle", m.PromptBundleID)
	add("secret version", m.SecretVersion)
	for _, p := range []struct {
		who string
		p   *runmanifest.Process
	}{{"control plane process", m.ServedBy.ControlPlane}, {"runtime process", m.ServedBy.Runtime}, {"runner process", m.ServedBy.Runner}} {
		if p.p != nil {
			add(p.who, strings.TrimSpace(p.p.Version+" "+p.p.BinarySHA256+" "+p.p.Image))
		}
	}
	if pk != nil {
		for _, a := range pk.Artifacts {
			right = append(right, builderNodes(a)...)
			if !a.Recorded {
				right = append(right, node{a.Kind + " packages", "not indexed (no verified SBOM)", ""})
				continue
			}
			for i, p := range a.Packages {
				if i == LineagePackages {
					break
				}
				right = append(right, node{"package of the " + a.Kind, p.String(), "/runs?package=" + url.QueryEscape(p.String())})
			}
			right = append(right, node{a.Kind + " packages", fmt.Sprintf("%d in all: the full list", len(a.Packages)),
				"/runs/" + url.PathEscape(m.RunID) + "/packages"})
		}
	}
	const rowH, boxW, boxH, gap = 44, 330, 34, 140
	rows := max(len(left), len(right), 1)
	h := rows*rowH + 20
	w := 3*boxW + 2*gap + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="lineage-title" width="%d" height="%d" viewBox="0 0 %d %d">`, w, h, w, h)
	fmt.Fprintf(&b, `<title id="lineage-title">lineage of run %s</title>`, esc(m.RunID))
	cx, cy := 10+boxW+gap, h/2-boxH/2
	box := func(x, y int, n node, class string) {
		if n.href != "" {
			fmt.Fprintf(&b, `<a href="%s" aria-label="%s">`, esc(n.href), esc(n.label+": "+n.value))
		}
		fmt.Fprintf(&b, `<g class="%s"><rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="#fff" stroke="#1d2a3a"/>`, class, x, y, boxW, boxH)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`, x+6, y+13, esc(n.label))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text></g>`, x+6, y+28, esc(ellipsis(n.value, 46)))
		if n.href != "" {
			b.WriteString(`</a>`)
		}
	}
	for i, n := range left {
		y := 10 + i*rowH
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`, 10+boxW, y+boxH/2, cx, cy+boxH/2)
		box(10, y, n, "in")
	}
	for i, n := range right {
		y := 10 + i*rowH
		x := cx + boxW + gap
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`, cx+boxW, cy+boxH/2, x, y+boxH/2)
		class := "artifact"
		switch {
		case strings.Contains(n.label, "package"):
			class = "package"
		case strings.HasSuffix(n.label, " builder"):
			class = "builder"
		}
		box(x, y, n, class)
	}
	box(cx, cy, node{"run", m.RunID + " (" + string(m.Status) + ")", ""}, "run")
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every value went through esc
}

// builderNodes are the boxes of who built artifact a, as the runtime
// recorded it from the artifact's verified SLSA provenance: one per
// builder, "no provenance" when the runtime read none, "provenance not
// read" when it never looked (an older runtime, an artifact not indexed).
func builderNodes(a runtimeapi.ArtifactPackages) []node {
	label := a.Kind + " builder"
	switch {
	case !a.ProvenanceRead:
		return []node{{label, "provenance not read by the runtime", ""}}
	case len(a.Builders) == 0:
		return []node{{label, "no provenance", ""}}
	}
	out := make([]node, 0, len(a.Builders))
	for _, b := range a.Builders {
		out = append(out, node{label, b.ID, ""})
	}
	return out
}

func esc(s string) string { return html.EscapeString(Clean(s)) }

func ellipsis(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
