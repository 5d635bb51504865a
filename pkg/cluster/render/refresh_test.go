package render_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// Every pod of a generation gets the refresh phase's machine id, as every
// local sandbox does: the runner's init container writes a fresh one into
// a small memory emptyDir (slipway-runner install --refresh), and the
// workspace container mounts that file read-only over /etc/machine-id.
func TestPodGetsFreshMachineID(t *testing.T) {
	tree, rev, _ := commit(t, goldenTree(t))
	res, err := render.Pool(context.Background(), tree, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	type mount struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	}
	type container struct {
		Name         string   `yaml:"name"`
		Command      []string `yaml:"command"`
		VolumeMounts []mount  `yaml:"volumeMounts"`
	}
	var obj struct {
		Kind string `yaml:"kind"`
		Spec struct {
			PodTemplate struct {
				Spec struct {
					InitContainers []container `yaml:"initContainers"`
					Containers     []container `yaml:"containers"`
					Volumes        []struct {
						Name     string         `yaml:"name"`
						EmptyDir map[string]any `yaml:"emptyDir"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"podTemplate"`
		} `yaml:"spec"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(res.YAML))
	templates := 0
	for {
		obj.Kind = ""
		obj.Spec.PodTemplate.Spec.InitContainers, obj.Spec.PodTemplate.Spec.Containers, obj.Spec.PodTemplate.Spec.Volumes = nil, nil, nil
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if obj.Kind != kubeobjects.KindSandboxTemplate {
			continue
		}
		templates++
		ps := obj.Spec.PodTemplate.Spec
		if len(ps.InitContainers) != 2 || ps.InitContainers[1].Name != kubeobjects.SeedInitContainer || len(ps.Containers) != 2 || ps.Containers[1].Name != kubeobjects.EgressContainer { // the golden pool is an allow-list
			t.Fatalf("containers: %+v", ps)
		}
		init, ws := ps.InitContainers[0], ps.Containers[0]
		if i := slices.Index(init.Command, "--refresh"); i < 0 || i+1 >= len(init.Command) || init.Command[i+1] != kubeobjects.RefreshDir {
			t.Errorf("init container %v does not run the refresh phase into %s", init.Command, kubeobjects.RefreshDir)
		}
		vol := ""
		for _, m := range init.VolumeMounts {
			if m.MountPath == kubeobjects.RefreshDir && !m.ReadOnly {
				vol = m.Name
			}
		}
		if vol == "" {
			t.Fatalf("init container mounts nothing writable at %s: %+v", kubeobjects.RefreshDir, init.VolumeMounts)
		}
		want := mount{Name: vol, MountPath: "/etc/machine-id", SubPath: shape.MachineIDFile, ReadOnly: true}
		if !slices.Contains(ws.VolumeMounts, want) {
			t.Errorf("workspace container mounts %+v, want %+v", ws.VolumeMounts, want)
		}
		for _, v := range ps.Volumes {
			if v.Name == vol && (v.EmptyDir == nil || v.EmptyDir["medium"] != "Memory" || v.EmptyDir["sizeLimit"] != "1Mi") {
				t.Errorf("volume %s: %+v, want a 1Mi memory emptyDir", vol, v)
			}
		}
	}
	if templates != 4 {
		t.Fatalf("%d templates, want 4", templates)
	}
}
