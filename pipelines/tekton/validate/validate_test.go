package validate

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
)

// taskFiles are the Tasks in pipelines/tekton, by Task name.
func loadAll(t *testing.T) (map[string]*v1.Task, *v1.Pipeline) {
	t.Helper()
	ctx, err := Context(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Tekton files in ..: %v", err)
	}
	tasks := map[string]*v1.Task{}
	var p *v1.Pipeline
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "pipeline.yaml" {
			if p, err = CheckPipeline(ctx, filepath.Base(f), data); err != nil {
				t.Fatal(err)
			}
			continue
		}
		task, err := CheckTask(ctx, filepath.Base(f), data)
		if err != nil {
			t.Fatal(err)
		}
		tasks[task.Name] = task
	}
	if p == nil {
		t.Fatal("no pipeline.yaml")
	}
	return tasks, p
}

var pinnedImage = regexp.MustCompile(`^[a-z0-9./-]+@sha256:[0-9a-f]{64}$`)

func TestTasksValidate(t *testing.T) {
	tasks, p := loadAll(t)
	for _, name := range []string{"slipway-lint", "slipway-pin", "slipway-template-build", "slipway-verify", "slipway-generation-create", "slipway-promote", "slipway-rollout"} {
		task, ok := tasks[name]
		if !ok {
			t.Errorf("Task %s missing", name)
			continue
		}
		var image *v1.ParamSpec
		for i := range task.Spec.Params {
			if task.Spec.Params[i].Name == "image" {
				image = &task.Spec.Params[i]
			}
		}
		if image == nil || image.Default == nil || !pinnedImage.MatchString(image.Default.StringVal) {
			t.Errorf("Task %s: param image must default to an image pinned by digest: %+v", name, image)
		}
		// Two steps: install (the released slipway by checksum, into the
		// slipway-bin emptyDir), then one slipway call.
		if len(task.Spec.Steps) != 2 || task.Spec.Steps[0].Name != "install" || !strings.Contains(task.Spec.Steps[0].Script, "sha256sum") {
			t.Errorf("Task %s: %d steps, want install (by checksum) and one slipway call", name, len(task.Spec.Steps))
			continue
		}
		for i, s := range task.Spec.Steps {
			if len(s.VolumeMounts) != 1 || s.VolumeMounts[0].Name != "slipway-bin" || s.VolumeMounts[0].MountPath != "/slipway/bin" {
				t.Errorf("Task %s step %s: mounts %+v, want slipway-bin at /slipway/bin", name, s.Name, s.VolumeMounts)
			}
			if i == 0 {
				continue
			}
			if s.Image != "$(params.image)" {
				t.Errorf("Task %s step %s: image %q, want $(params.image)", name, s.Name, s.Image)
			}
			if strings.Count(s.Script, "slipway ") != 1 || !strings.Contains(s.Script, "--ci tekton --tekton-results") {
				t.Errorf("Task %s step %s: want one slipway --ci tekton call:\n%s", name, s.Name, s.Script)
			}
		}
	}
	build := tasks["slipway-template-build"]
	for _, want := range []string{"IMAGE_URL", "IMAGE_DIGEST"} {
		found := false
		for _, r := range build.Spec.Results {
			found = found || r.Name == want
		}
		if !found {
			t.Errorf("template-build does not declare %s (Tekton Chains' type hint)", want)
		}
	}
	if err := CheckPipelineTasks(p, tasks); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, pt := range p.Spec.Tasks {
		order = append(order, pt.TaskRef.Name)
	}
	if got := strings.Join(order, " "); got != "slipway-template-build slipway-verify slipway-generation-create slipway-promote" {
		t.Errorf("pipeline order %s", got)
	}
}

// The checks must refuse broken documents; each case breaks a valid Task or
// the Pipeline in one place.
func TestBrokenRefused(t *testing.T) {
	ctx, err := Context(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lint, err := os.ReadFile("../lint.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"bad param reference", `"$(params.config)"`, `"$(params.konfig)"`, "params.konfig"},
		{"undeclared result", `$(results.FINDINGS.path)`, `$(results.NOPE.path)`, "NOPE"},
		{"unknown field", "workingDir:", "workDir:", "workDir"},
		{"array param in a string", `"$(params.config)"`, `"$(params.paths)"`, "paths"},
	} {
		t.Run(c.name, func(t *testing.T) {
			broken := strings.Replace(string(lint), c.from, c.to, 1)
			if broken == string(lint) {
				t.Fatalf("%q not in lint.yaml", c.from)
			}
			_, err := CheckTask(ctx, "lint.yaml", []byte(broken))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "lint.yaml") {
				t.Fatalf("err = %v, want one naming lint.yaml and %s", err, c.want)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}

	tasks, _ := loadAll(t)
	pdata, err := os.ReadFile("../pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"undeclared task result", "$(tasks.build.results.REF)", "$(tasks.build.results.REFERENCE)", "REFERENCE"},
		{"undeclared param", "{name: kind, value: workspace-template}", "{name: kinds, value: workspace-template}", `"kinds"`},
		{"required param missing", "        - {name: push, value: $(params.push)}\n", "", `"push"`},
		{"unbound workspace", "        - {name: signing, workspace: signing}\n", "", `"signing"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			broken := strings.Replace(string(pdata), c.from, c.to, 1)
			if broken == string(pdata) {
				t.Fatalf("%q not in pipeline.yaml", c.from)
			}
			p, err := CheckPipeline(ctx, "pipeline.yaml", []byte(broken))
			if err == nil {
				err = CheckPipelineTasks(p, tasks)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %s", err, c.want)
			}
		})
	}
	// A reference to a task not in the pipeline is Tekton's own refusal.
	broken := strings.Replace(string(pdata), "$(tasks.verify.results.REF)", "$(tasks.verifier.results.REF)", 1)
	if _, err := CheckPipeline(ctx, "pipeline.yaml", []byte(broken)); err == nil || !strings.Contains(err.Error(), "verifier") {
		t.Errorf("pipeline with a reference to an absent task: %v", err)
	}
}
