// Package pipelines holds Slipway's CI pipeline steps, each a thin step over
// the slipway CLI: github/ (composite actions, one folder each), gitlab/
// (a CI/CD component: templates/<step>.yml, a spec: inputs: header and one
// job) and tekton/ (Tasks and a Pipeline). Its Go code is only the tests
// that validate those files: a strict schema check of the composite
// actions' action.yml, actionlint over the sample workflows in
// ../examples/github with the local actions resolved, the setup action's
// installer run for real; GitLab's published CI schema (ci.json, as the
// gitlab-ci-local npm package embeds it) over every template document and
// ../examples/gitlab, and the example pipeline run by gitlab-ci-local on the
// host shell executor. The Tekton files are checked by the nested module
// tekton/validate with Tekton's own code (make test-tekton).
package pipelines
