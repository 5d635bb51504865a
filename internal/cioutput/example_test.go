package cioutput_test

import (
	"os"

	"github.com/slipway-dev/slipway/internal/cioutput"
)

// A lint finding as a GitHub annotation; the findings count would go to
// $GITHUB_OUTPUT (an empty OutputFile is refused when there are outputs).
func ExampleGitHubWriter() {
	w := &cioutput.GitHubWriter{Stdout: os.Stdout}
	_ = w.Write(cioutput.Step{Annotations: []cioutput.Annotation{{
		Level: cioutput.Error, File: "deploy/app.yaml", Line: 7, Col: 14,
		Title: "mutable image reference", Message: "nginx:1.25: tag without digest",
	}}})
	// Output:
	// ::error file=deploy/app.yaml,line=7,col=14,title=mutable image reference::nginx:1.25: tag without digest
}
