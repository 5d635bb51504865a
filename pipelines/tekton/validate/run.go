package validate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/tektoncd/pipeline/pkg/apis/pipeline"
	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"github.com/tektoncd/pipeline/pkg/reconciler/taskrun/resources"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leftover is a Tekton variable left after substitution (a shell command
// substitution such as $(dirname ...) has a space after the name).
var leftover = regexp.MustCompile(`\$\((params|results|workspaces|context|steps|tasks)\.[^)]*\)`)

// Substitute applies Tekton's own substitution to a Task for a TaskRun with
// params, as the TaskRun reconciler does before it builds the pod:
// parameters (with the Task's defaults), context, results and workspaces
// (each declared workspace bound). It refuses a spec that still holds a
// Tekton variable afterwards.
func Substitute(ctx context.Context, t *v1.Task, params v1.Params) (*v1.TaskSpec, error) {
	tr := &v1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name + "-run", Namespace: "default"},
		Spec:       v1.TaskRunSpec{TaskRef: &v1.TaskRef{Name: t.Name}, Params: params},
	}
	for _, w := range t.Spec.Workspaces {
		tr.Spec.Workspaces = append(tr.Spec.Workspaces, v1.WorkspaceBinding{Name: w.Name, EmptyDir: &corev1.EmptyDirVolumeSource{}})
	}
	spec := t.Spec.DeepCopy()
	spec = resources.ApplyParameters(spec, tr, spec.Params...)
	spec = resources.ApplyContexts(spec, t.Name, tr)
	spec = resources.ApplyResults(spec)
	spec = resources.ApplyWorkspaces(ctx, spec, spec.Workspaces, tr.Spec.Workspaces, nil)
	for _, s := range spec.Steps {
		for _, text := range append([]string{s.Image, s.Script, s.WorkingDir}, s.Args...) {
			if m := leftover.FindString(text); m != "" {
				return nil, fmt.Errorf("task %s step %s: %s left after substitution", t.Name, s.Name, m)
			}
		}
	}
	return spec, nil
}

// Host is where the harness runs a substituted Task's steps: the directories
// that stand for the pod's mounts and the Secrets its env refers to.
type Host struct {
	// Results stands for /tekton/results.
	Results string
	// Workspaces maps a workspace name to the directory that stands for
	// /workspace/<name>.
	Workspaces map[string]string
	// Secrets maps a Secret's name to its data.
	Secrets map[string]map[string]string
	// Env is the base environment of every step (PATH, HOME, ...).
	Env []string
	// mounts maps a step's volume mount path to the directory standing
	// for its emptyDir volume: made by Run for each Task run, shared by
	// its steps, as a pod's emptyDir is.
	mounts map[string]string
}

// hostPath maps a path inside the pod to the host directory standing for it.
func (h *Host) hostPaths(s string) string {
	s = strings.ReplaceAll(s, pipeline.DefaultResultPath, h.Results)
	for m, dir := range h.mounts {
		s = strings.ReplaceAll(s, m, dir)
	}
	names := make([]string, 0, len(h.Workspaces))
	for n := range h.Workspaces {
		names = append(names, n)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names))) // longer names first
	for _, n := range names {
		s = strings.ReplaceAll(s, pipeline.WorkspaceDir+"/"+n, h.Workspaces[n])
	}
	return s
}

// StepError is a step that exited non-zero, with its output.
type StepError struct {
	Step   string
	Code   int
	Output string
}

func (e *StepError) Error() string {
	return fmt.Sprintf("step %s: exit %d\n%s", e.Step, e.Code, e.Output)
}

// Run runs the steps of a substituted spec in order on the host, each script
// written to a file and executed with the step's args, as Tekton's
// entrypoint does, and stops at the first that fails. It returns the results
// written (a step's failure still returns what was written); a result file
// the Task does not declare is an error.
func Run(ctx context.Context, spec *v1.TaskSpec, h *Host) (map[string]string, string, error) {
	var log bytes.Buffer
	scripts, err := os.MkdirTemp("", "tekton-scripts-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(scripts)
	// emptyDir volumes: a directory each, for this run's steps.
	hc := *h
	h = &hc
	h.mounts = map[string]string{}
	vols := map[string]string{}
	for _, v := range spec.Volumes {
		if v.EmptyDir == nil {
			return nil, "", fmt.Errorf("volume %s: only emptyDir volumes are run by this harness", v.Name)
		}
		dir := filepath.Join(scripts, "volume-"+v.Name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, "", err
		}
		vols[v.Name] = dir
	}
	for _, s := range spec.Steps {
		for _, m := range s.VolumeMounts {
			dir, ok := vols[m.Name]
			if !ok {
				return nil, "", fmt.Errorf("step %s: volume mount %s names no volume of the Task", s.Name, m.Name)
			}
			h.mounts[m.MountPath] = dir
		}
	}
	var runErr error
	for i, s := range spec.Steps {
		if s.Script == "" {
			return nil, "", fmt.Errorf("step %s: only script steps are run by this harness", s.Name)
		}
		file := filepath.Join(scripts, fmt.Sprintf("%d-%s", i, s.Name))
		if err := os.WriteFile(file, []byte(h.hostPaths(s.Script)), 0o755); err != nil {
			return nil, "", err
		}
		args := make([]string, len(s.Args))
		for j, a := range s.Args {
			args[j] = h.hostPaths(a)
		}
		cmd := exec.CommandContext(ctx, file, args...)
		cmd.Dir = h.hostPaths(s.WorkingDir)
		cmd.Env = append([]string{}, h.Env...)
		for _, e := range s.Env {
			v, err := h.envValue(e)
			if err != nil {
				return nil, "", fmt.Errorf("step %s: %w", s.Name, err)
			}
			if v != nil {
				cmd.Env = append(cmd.Env, e.Name+"="+*v)
			}
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		log.Write(out.Bytes())
		if err != nil {
			code := -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			runErr = &StepError{Step: s.Name, Code: code, Output: out.String()}
			break
		}
	}
	results, err := readResults(spec, h.Results)
	if err != nil {
		return nil, log.String(), err
	}
	return results, log.String(), runErr
}

func (h *Host) envValue(e corev1.EnvVar) (*string, error) {
	if e.ValueFrom == nil {
		v := h.hostPaths(e.Value)
		return &v, nil
	}
	ref := e.ValueFrom.SecretKeyRef
	if ref == nil {
		return nil, fmt.Errorf("env %s: only values and secretKeyRef are supported", e.Name)
	}
	if v, ok := h.Secrets[ref.Name][ref.Key]; ok {
		return &v, nil
	}
	if ref.Optional != nil && *ref.Optional {
		return nil, nil
	}
	return nil, fmt.Errorf("env %s: secret %s has no key %s", e.Name, ref.Name, ref.Key)
}

// readResults reads the result files in dir; every one must be declared.
func readResults(spec *v1.TaskSpec, dir string) (map[string]string, error) {
	declared := map[string]bool{}
	for _, r := range spec.Results {
		declared[r.Name] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if !declared[e.Name()] {
			return nil, fmt.Errorf("result file %s is not a result the Task declares", e.Name())
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = string(b)
	}
	return out, nil
}
