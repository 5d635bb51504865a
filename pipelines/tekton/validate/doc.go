// Package validate checks Slipway's Tekton Tasks and Pipeline with Tekton's
// own Go types (SetDefaults and Validate, as the webhook does) and runs the
// steps of the Tasks on the host after Tekton's own parameter and result
// substitution (Substitute, Run), and the Pipeline's tasks in order with
// Tekton's own PipelineRun substitution between them (RunPipeline). It is a module of its own so that tektoncd/pipeline and its
// Kubernetes dependencies never enter the root go.mod.
package validate
