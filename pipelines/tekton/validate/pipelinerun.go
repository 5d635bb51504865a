package validate

import (
	"context"
	"fmt"
	"os"

	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	prresources "github.com/tektoncd/pipeline/pkg/reconciler/pipelinerun/resources"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"
)

// PipelineRunResult is what RunPipeline did: each pipeline task's results
// (a task that failed has its results as far as they were written), the
// Pipeline's results, the log, and the task that failed.
type PipelineRunResult struct {
	Tasks   map[string]map[string]string
	Results map[string]string
	Log     string
	// Failed is the pipeline task that failed ("" when all succeeded); the
	// tasks after it did not run.
	Failed string
}

// RunPipeline runs a Pipeline's tasks in the order it lists them on the
// host, as a PipelineRun with params would: Tekton's own pipelinerun code
// substitutes the PipelineRun's params and context into the Pipeline
// (ApplyParameters, ApplyContexts), resolves each pipeline task's
// $(tasks.X.results.Y) from the TaskRuns before it (ResolveResultRefs,
// ApplyTaskResults), and computes the Pipeline's results
// (ApplyTaskResultsToPipelineResults); each Task is then substituted and
// run by Substitute and Run, with base's secrets and environment and a
// results directory of its own. workspaces maps a Pipeline workspace to the
// directory standing for it. It stops at the first task that fails and
// returns its error. A task using when, matrix or finally is refused:
// this harness does not evaluate them.
func RunPipeline(ctx context.Context, p *v1.Pipeline, tasks map[string]*v1.Task, params v1.Params, workspaces map[string]string, base Host) (*PipelineRunResult, error) {
	pr := &v1.PipelineRun{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name + "-run", Namespace: "default"},
		Spec:       v1.PipelineRunSpec{PipelineRef: &v1.PipelineRef{Name: p.Name}, Params: params},
	}
	spec, err := prresources.ApplyParameters(&p.Spec, pr)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	spec = prresources.ApplyContexts(spec, p.Name, pr)
	if len(spec.Finally) > 0 {
		return nil, fmt.Errorf("pipeline %s: finally tasks are not run by this harness", p.Name)
	}
	out := &PipelineRunResult{Tasks: map[string]map[string]string{}}
	var state prresources.PipelineRunState
	taskRunResults := map[string][]v1.TaskRunResult{}
	for i := range spec.Tasks {
		pt := spec.Tasks[i].DeepCopy()
		if len(pt.When) > 0 || pt.IsMatrixed() {
			return out, fmt.Errorf("pipeline %s: task %s: when and matrix are not evaluated by this harness", p.Name, pt.Name)
		}
		target := &prresources.ResolvedPipelineTask{PipelineTask: pt}
		refs, _, err := prresources.ResolveResultRefs(state, prresources.PipelineRunState{target})
		if err != nil {
			return out, fmt.Errorf("pipeline %s: task %s: %w", p.Name, pt.Name, err)
		}
		prresources.ApplyTaskResults(prresources.PipelineRunState{target}, refs)
		pt = target.PipelineTask
		t, ok := tasks[pt.TaskRef.Name]
		if !ok {
			return out, fmt.Errorf("pipeline %s: task %s: no Task %s", p.Name, pt.Name, pt.TaskRef.Name)
		}
		ts, err := Substitute(ctx, t, pt.Params)
		if err != nil {
			return out, fmt.Errorf("pipeline %s: task %s: %w", p.Name, pt.Name, err)
		}
		h := base
		h.Workspaces = map[string]string{}
		for _, w := range pt.Workspaces {
			dir, ok := workspaces[w.Workspace]
			if !ok {
				return out, fmt.Errorf("pipeline %s: task %s: workspace %s is not bound", p.Name, pt.Name, w.Workspace)
			}
			h.Workspaces[w.Name] = dir
		}
		// Each TaskRun has its own /tekton/results.
		if h.Results, err = os.MkdirTemp("", "tekton-results-"); err != nil {
			return out, err
		}
		res, log, runErr := Run(ctx, ts, &h)
		os.RemoveAll(h.Results)
		out.Log += log
		out.Tasks[pt.Name] = res
		if runErr != nil {
			out.Failed = pt.Name
			return out, fmt.Errorf("pipeline %s: task %s: %w", p.Name, pt.Name, runErr)
		}
		tr := &v1.TaskRun{ObjectMeta: metav1.ObjectMeta{Name: pr.Name + "-" + pt.Name}}
		for _, r := range ts.Results {
			if v, ok := res[r.Name]; ok {
				tr.Status.Results = append(tr.Status.Results, v1.TaskRunResult{Name: r.Name, Type: v1.ResultsTypeString, Value: *v1.NewStructuredValues(v)})
			}
		}
		tr.Status.SetCondition(&apis.Condition{Type: apis.ConditionSucceeded, Status: corev1.ConditionTrue})
		target.TaskRuns, target.TaskRunNames = []*v1.TaskRun{tr}, []string{tr.Name}
		state = append(state, target)
		taskRunResults[pt.Name] = tr.Status.Results
	}
	results, err := prresources.ApplyTaskResultsToPipelineResults(spec.Results, taskRunResults, nil, map[string]string{})
	if err != nil {
		return out, fmt.Errorf("pipeline %s: results: %w", p.Name, err)
	}
	out.Results = map[string]string{}
	for _, r := range results {
		out.Results[r.Name] = r.Value.StringVal
	}
	return out, nil
}
