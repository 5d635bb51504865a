// Package pipelines holds Slipway's CI pipeline steps, each a thin step over
// the slipway CLI: github/ (composite actions, one folder each). Its Go code
// is only the tests that validate those files: a strict schema check of the
// composite actions' action.yml, actionlint over the sample workflows in
// ../examples/github with the local actions resolved, and the setup
// action's installer run for real. tekton/ holds Tekton Tasks and a
// Pipeline, checked by the nested module tekton/validate with Tekton's own
// code (make test-tekton). A GitLab component comes later (issue 15).
package pipelines
