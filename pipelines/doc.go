// Package pipelines holds Slipway's CI pipeline steps, each a thin step over
// the slipway CLI: github/ (composite actions, one folder each), gitlab/
// (a CI/CD component: templates/<step>.yml, a spec: inputs: header and one
// job) and tekton/ (Tasks and a Pipeline). Its Go code is only the tests
// that validate those files: a strict schema check of the composite
// actions' action.yml, actionlint over the sample workflows in
// ../examples/github with the local actions resolved, the setup action's
// installer run for real; GitLab's published CI schema (ci.json, as the
// gitlab-ci-local npm package embeds it) over every template document and
// ../examples/gitlab, and the example pipelines run by gitlab-ci-local on the
// host shell executor; ../examples/github/local-release.yml run by nektos/act
// on the host. The release runs (template build, verify, generation, promote,
// rollout) share testdata/release-chain.sh: a registry's images, a config
// repository and a running runtime. The Tekton files are checked and run by
// the nested module tekton/validate with Tekton's own code (make
// test-tekton).
package pipelines
