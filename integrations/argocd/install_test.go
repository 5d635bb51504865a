package argocd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/testharness/need"
)

// TestInstall checks the sidecar component: the Slipway image is a
// well-formed reference by digest, and `kustomize build` ($KUSTOMIZE) of
// Argo CD v2.14.21's own install.yaml (from its module) with the component
// gives argocd-repo-server the slipway sidecar running argocd-cmp-server
// with that image, mounting plugin.yaml from the generated ConfigMap, the
// operator's policy from the ConfigMap slipway-policy at
// $SLIPWAY_ARGOCD_POLICY_FILE, and /tmp (the checkouts) in memory.
func TestInstall(t *testing.T) {
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct {
			Name, NewName, Digest string
			NewTag                string `json:"newTag"`
		}
	}
	if err := yaml.Unmarshal(b, &k); err != nil || len(k.Images) != 1 || k.Images[0].Name != "slipway" {
		t.Fatalf("kustomization.yaml images: %+v %v", k.Images, err)
	}
	// The released slipway-cmp, by tag and digest (make pin-argocd writes
	// both; kustomize keeps the tag beside the digest).
	image := k.Images[0].NewName + "@" + k.Images[0].Digest
	if k.Images[0].NewTag != "" {
		image = k.Images[0].NewName + ":" + k.Images[0].NewTag + "@" + k.Images[0].Digest
	}
	if !strings.HasSuffix(k.Images[0].NewName, "/slipway-cmp") {
		t.Errorf("kustomization.yaml names %s, not the released slipway-cmp image", k.Images[0].NewName)
	}
	if _, err := name.NewDigest(image, name.StrictValidation); err != nil {
		t.Fatalf("the Slipway image %q is not a reference by digest: %v", image, err)
	}

	kustomize := need.Env(t, "KUSTOMIZE", "set it to the kustomize CLI to build the component (make test-argocd does)")
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-cd/v2").Output()
	if err != nil {
		t.Fatal(err)
	}
	install, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "manifests", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	component, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, component)
	if err != nil {
		t.Fatal(err)
	}
	for f, body := range map[string]string{
		"install.yaml":       string(install),
		"kustomization.yaml": "namespace: argocd\nresources: [install.yaml]\ncomponents: [" + rel + "]\n",
	} {
		if err := os.WriteFile(filepath.Join(overlay, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	built, err := exec.Command(kustomize, "build", "--load-restrictor", "LoadRestrictionsNone", overlay).Output()
	if err != nil {
		t.Fatalf("kustomize build: %v %s", err, exitStderr(err))
	}
	plugin, err := os.ReadFile("plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var found, cm bool
	for _, doc := range strings.Split(string(built), "\n---\n") {
		var o struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
			Data     map[string]string
			Spec     struct {
				Template struct {
					Spec struct {
						Volumes []struct {
							Name      string
							ConfigMap *struct{ Name string }
							EmptyDir  *struct{ Medium string }
						}
						Containers []struct {
							Name, Image  string
							Command      []string
							Env          []struct{ Name, Value string }
							VolumeMounts []struct{ Name, MountPath, SubPath string }
						}
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		switch {
		case o.Kind == "ConfigMap" && o.Metadata.Name == "slipway-cmp-plugin":
			cm = o.Data["plugin.yaml"] == string(plugin) && o.Metadata.Namespace == "argocd"
		case o.Kind == "Deployment" && o.Metadata.Name == "argocd-repo-server":
			names := []string{}
			for _, c := range o.Spec.Template.Spec.Containers {
				names = append(names, c.Name)
				if c.Name != "slipway" {
					continue
				}
				mounts := map[string]string{}
				for _, m := range c.VolumeMounts {
					mounts[m.MountPath] = m.Name
					found := false
					for _, v := range o.Spec.Template.Spec.Volumes {
						found = found || v.Name == m.Name
					}
					if !found {
						t.Errorf("the sidecar mounts %s, which is no volume of the pod", m.Name)
					}
				}
				env := map[string]string{}
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
				// The operator's policy, from the ConfigMap slipway-policy,
				// and the checkouts untarred in memory.
				volumes := map[string]string{}
				for _, v := range o.Spec.Template.Spec.Volumes {
					switch {
					case v.ConfigMap != nil:
						volumes[v.Name] = "configMap " + v.ConfigMap.Name
					case v.EmptyDir != nil:
						volumes[v.Name] = "emptyDir " + v.EmptyDir.Medium
					}
				}
				policyFile, _ := strings.CutSuffix(env["SLIPWAY_ARGOCD_POLICY_FILE"], "/verification.yaml")
				found = c.Image == image && strings.Join(c.Command, " ") == "/var/run/argocd/argocd-cmp-server" &&
					mounts["/home/argocd/cmp-server/config/plugin.yaml"] == "slipway-plugin" && mounts["/home/argocd/cmp-server/plugins"] == "plugins" &&
					mounts["/var/run/argocd"] == "var-files" &&
					volumes[mounts[policyFile]] == "configMap slipway-policy" && volumes[mounts["/tmp"]] == "emptyDir Memory" &&
					strings.HasPrefix(env["SLIPWAY_VERIFY_CACHE_DIR"], "/tmp/")
			}
			if !found {
				t.Errorf("argocd-repo-server's containers %v: no slipway sidecar as wanted:\n%s", names, doc)
			}
		}
	}
	if !found || !cm {
		t.Fatalf("sidecar %v, plugin ConfigMap %v", found, cm)
	}
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
