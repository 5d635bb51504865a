package validate

import (
	"fmt"
	"regexp"

	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
)

// taskResultRef is a Pipeline's reference to a result of one of its tasks.
var taskResultRef = regexp.MustCompile(`\$\(tasks\.([a-z0-9-]+)\.results\.([A-Za-z0-9_.-]+)\)`)

// CheckPipelineTasks checks what a controller checks only once the Tasks are
// resolved: each pipeline task's taskRef names one of tasks, every param it
// passes is declared by that Task and every required param is passed, every
// Task workspace is bound, and every $(tasks.X.results.Y) names a result
// that X's Task declares.
func CheckPipelineTasks(p *v1.Pipeline, tasks map[string]*v1.Task) error {
	byPipelineTask := map[string]*v1.Task{}
	for _, pt := range p.Spec.Tasks {
		if pt.TaskRef == nil {
			return fmt.Errorf("pipeline %s: task %s has no taskRef", p.Name, pt.Name)
		}
		t, ok := tasks[pt.TaskRef.Name]
		if !ok {
			return fmt.Errorf("pipeline %s: task %s refers to Task %q, not one of ours", p.Name, pt.Name, pt.TaskRef.Name)
		}
		byPipelineTask[pt.Name] = t
		declared := map[string]bool{}
		for _, ps := range t.Spec.Params {
			declared[ps.Name] = true
		}
		given := map[string]bool{}
		for _, param := range pt.Params {
			if !declared[param.Name] {
				return fmt.Errorf("pipeline %s: task %s passes param %q that Task %s does not declare", p.Name, pt.Name, param.Name, t.Name)
			}
			given[param.Name] = true
		}
		for _, ps := range t.Spec.Params {
			if ps.Default == nil && !given[ps.Name] {
				return fmt.Errorf("pipeline %s: task %s does not pass Task %s's required param %q", p.Name, pt.Name, t.Name, ps.Name)
			}
		}
		bound := map[string]bool{}
		for _, w := range pt.Workspaces {
			bound[w.Name] = true
		}
		for _, w := range t.Spec.Workspaces {
			if !w.Optional && !bound[w.Name] {
				return fmt.Errorf("pipeline %s: task %s does not bind Task %s's workspace %q", p.Name, pt.Name, t.Name, w.Name)
			}
		}
	}
	check := func(where, s string) error {
		for _, m := range taskResultRef.FindAllStringSubmatch(s, -1) {
			t, ok := byPipelineTask[m[1]]
			if !ok {
				return fmt.Errorf("pipeline %s: %s refers to task %q, not in the pipeline", p.Name, where, m[1])
			}
			found := false
			for _, r := range t.Spec.Results {
				found = found || r.Name == m[2]
			}
			if !found {
				return fmt.Errorf("pipeline %s: %s refers to result %s of task %s, which Task %s does not declare", p.Name, where, m[2], m[1], t.Name)
			}
		}
		return nil
	}
	for _, pt := range p.Spec.Tasks {
		for _, param := range pt.Params {
			vals := append([]string{param.Value.StringVal}, param.Value.ArrayVal...)
			for _, v := range vals {
				if err := check("task "+pt.Name+" param "+param.Name, v); err != nil {
					return err
				}
			}
		}
	}
	for _, r := range p.Spec.Results {
		if err := check("result "+r.Name, r.Value.StringVal); err != nil {
			return err
		}
	}
	return nil
}
