// Package deploy_test checks Slipway's install manifests (deploy/): every
// overlay builds with kustomize's own API, every pod template passes Pod
// Security "restricted" as the API server's admission plugin judges it (its
// policy package), every image is pinned by digest, no Secret value is in
// the manifests, and secrets reach the processes as files or Secret
// references only.
package deploy_test

import (
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/deploy/internal/harness"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/secretfile"
)

// overlays are the installs deploy/ offers, with the replicas of each plane.
var overlays = map[string]int32{"single": 1, "ha": 2}

// build runs kustomize build on overlays/name, as kubectl apply -k does.
func build(t testing.TB, name string) resmap.ResMap {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "overlays/"+name)
	if err != nil {
		t.Fatalf("kustomize build overlays/%s: %v", name, err)
	}
	return rm
}

// objects decodes every object of kind in rm into a T.
func objects[T any](t testing.TB, rm resmap.ResMap, kind string) map[string]*T {
	t.Helper()
	out := map[string]*T{}
	for _, r := range rm.Resources() {
		if r.GetKind() != kind {
			continue
		}
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		v := new(T)
		if err := yaml.UnmarshalStrict(b, v); err != nil {
			t.Fatalf("%s %s: %v\n%s", kind, r.GetName(), err, b)
		}
		out[r.GetName()] = v
	}
	return out
}

func TestOverlaysBuild(t *testing.T) {
	for name, replicas := range overlays {
		t.Run(name, func(t *testing.T) {
			rm := build(t, name)
			deps := objects[appsv1.Deployment](t, rm, "Deployment")
			if got := slices.Sorted(maps.Keys(deps)); !slices.Equal(got, []string{"slipway-control", "slipway-runtime"}) {
				t.Fatalf("Deployments %v, want slipway-control and slipway-runtime", got)
			}
			for n, d := range deps {
				if d.Namespace != "slipway-system" {
					t.Errorf("Deployment %s in namespace %q, want slipway-system", n, d.Namespace)
				}
				if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
					t.Errorf("Deployment %s: replicas %v, want %d", n, d.Spec.Replicas, replicas)
				}
				checkProbes(t, n, d.Spec.Template.Spec)
				checkSettings(t, rm, n, d.Spec.Template.Spec)
				aff := d.Spec.Template.Spec.Affinity
				spread := aff != nil && aff.PodAntiAffinity != nil && len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 1 &&
					aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey == "kubernetes.io/hostname"
				if spread != (name == "ha") {
					t.Errorf("Deployment %s: anti-affinity over hosts %v, want it in ha only", n, spread)
				}
			}
			pdbs := objects[policyv1.PodDisruptionBudget](t, rm, "PodDisruptionBudget")
			for _, n := range []string{"slipway-control", "slipway-runtime"} {
				p := pdbs[n]
				if p == nil {
					t.Errorf("no PodDisruptionBudget %s", n)
					continue
				}
				if sel := p.Spec.Selector.MatchLabels["app.kubernetes.io/name"]; sel != n || deps[n].Spec.Template.Labels["app.kubernetes.io/name"] != n {
					t.Errorf("PodDisruptionBudget %s selects %q, not its Deployment's pods", n, sel)
				}
				min, max := p.Spec.MinAvailable, p.Spec.MaxUnavailable
				switch name {
				case "ha":
					if min == nil || min.IntValue() != 1 || max != nil {
						t.Errorf("ha: PodDisruptionBudget %s: minAvailable %v maxUnavailable %v, want minAvailable 1 alone", n, min, max)
					}
				default:
					// one replica: a minAvailable 1 would block every drain
					if min != nil || max == nil || max.IntValue() != 1 {
						t.Errorf("%s: PodDisruptionBudget %s: minAvailable %v maxUnavailable %v, want maxUnavailable 1", name, n, min, max)
					}
				}
			}
		})
	}
}

// checkProbes: liveness on /healthz, readiness on /readyz, both on the
// container's API port.
func checkProbes(t testing.TB, dep string, spec corev1.PodSpec) {
	t.Helper()
	for _, c := range spec.Containers {
		for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "http" {
				t.Errorf("Deployment %s container %s: want an HTTP probe of %s on port http, have %+v", dep, c.Name, want, probe)
			}
		}
		if len(c.Ports) != 1 || c.Ports[0].Name != "http" {
			t.Errorf("Deployment %s container %s: ports %+v, want one named http", dep, c.Name, c.Ports)
		}
	}
}

// checkSettings: the ConfigMap references resolve to the generated
// ConfigMap (its name with kustomize's hash), which holds the key.
func checkSettings(t testing.TB, rm resmap.ResMap, dep string, spec corev1.PodSpec) {
	t.Helper()
	cms := objects[corev1.ConfigMap](t, rm, "ConfigMap")
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
				continue
			}
			ref := e.ValueFrom.ConfigMapKeyRef
			cm := cms[ref.Name]
			if cm == nil || !strings.HasPrefix(ref.Name, "slipway-settings-") {
				t.Errorf("Deployment %s: env %s names ConfigMap %s, which the build does not hold", dep, e.Name, ref.Name)
				continue
			}
			if _, ok := cm.Data[ref.Key]; !ok {
				t.Errorf("Deployment %s: env %s: ConfigMap %s has no key %s", dep, e.Name, ref.Name, ref.Key)
			}
		}
	}
}

// Every pod template meets Pod Security "restricted" at the latest version,
// as the PodSecurity admission plugin evaluates it.
func TestPodSecurityRestricted(t *testing.T) {
	ev, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for name := range overlays {
		rm := build(t, name)
		n := 0
		for dn, d := range objects[appsv1.Deployment](t, rm, "Deployment") {
			res := psapolicy.AggregateCheckResults(ev.EvaluatePod(lv, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec))
			if !res.Allowed {
				t.Errorf("%s: Deployment %s's pods violate Pod Security restricted: %s", name, dn, res.ForbiddenDetail())
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
					t.Errorf("%s: Deployment %s container %s: root filesystem not read-only", name, dn, c.Name)
				}
			}
			n++
		}
		if n != 2 {
			t.Fatalf("%s: %d Deployments checked, want 2", name, n)
		}
		// the namespaces enforce it too
		for ns, o := range objects[corev1.Namespace](t, rm, "Namespace") {
			if o.Labels[psaapi.EnforceLevelLabel] != string(psaapi.LevelRestricted) {
				t.Errorf("%s: Namespace %s: %s=%q, want restricted", name, ns, psaapi.EnforceLevelLabel, o.Labels[psaapi.EnforceLevelLabel])
			}
		}
	}
	// The evaluator is not lenient: the runtime's pod without its seccomp
	// profile and with a writable root fails.
	d := objects[appsv1.Deployment](t, build(t, "ha"), "Deployment")["slipway-runtime"]
	d.Spec.Template.Spec.SecurityContext.SeccompProfile = nil
	d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
	res := psapolicy.AggregateCheckResults(ev.EvaluatePod(lv, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec))
	if res.Allowed || !strings.Contains(res.ForbiddenReason(), "seccompProfile") || !strings.Contains(res.ForbiddenReason(), "allowPrivilegeEscalation") {
		t.Errorf("a pod without a seccomp profile and allowPrivilegeEscalation was judged %+v", res)
	}
}

var slipwayImage = regexp.MustCompile(`^ghcr\.io/slipway-dev/slipway(:[\w.-]+)?@`)

// Every image is pinned by digest; slipway's is the images entry's, and
// each container's $SLIPWAY_IMAGE (what it reports in served_by) is it.
func TestImagesByDigest(t *testing.T) {
	for name := range overlays {
		for dn, d := range objects[appsv1.Deployment](t, build(t, name), "Deployment") {
			spec := d.Spec.Template.Spec
			for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
				if !harness.ByDigest.MatchString(c.Image) {
					t.Errorf("%s: Deployment %s container %s: image %q is not pinned by digest", name, dn, c.Name, c.Image)
				}
				if !slipwayImage.MatchString(c.Image) {
					t.Errorf("%s: Deployment %s container %s: image %q is not Slipway's release", name, dn, c.Name, c.Image)
				}
				// the image the process names in served_by is the one it runs
				declared := "(none)"
				for _, e := range c.Env {
					if e.Name == "SLIPWAY_IMAGE" {
						declared = e.Value
					}
				}
				if declared != c.Image {
					t.Errorf("%s: Deployment %s container %s: $SLIPWAY_IMAGE is %q, its image %q", name, dn, c.Name, declared, c.Image)
				}
			}
		}
	}
}

// secretish names what must never be a literal: a database DSN, a token,
// a password, a key.
var secretish = regexp.MustCompile(`(?i)(token|password|passwd|secret|dsn|key|credential)`)

// No Secret is in the manifests (the operator makes them), no env variable
// that looks like a secret holds a literal, no argument holds a DSN or a
// password, and the files the processes read secrets from are Secret
// volumes.
func TestNoSecretValues(t *testing.T) {
	for name := range overlays {
		rm := build(t, name)
		for _, r := range rm.Resources() {
			if r.GetKind() == "Secret" {
				t.Errorf("%s: the install holds Secret %s: secrets are the operator's, never in the manifests", name, r.GetName())
			}
		}
		for dn, d := range objects[appsv1.Deployment](t, rm, "Deployment") {
			spec := d.Spec.Template.Spec
			secretVols := map[string]string{} // mount path -> Secret
			vols := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				vols[v.Name] = v
			}
			for _, c := range spec.Containers {
				for _, m := range c.VolumeMounts {
					if v := vols[m.Name]; v.Secret != nil {
						if !m.ReadOnly {
							t.Errorf("%s: Deployment %s mounts Secret %s writable", name, dn, v.Secret.SecretName)
						}
						if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
							t.Errorf("%s: Deployment %s: Secret %s's files are readable by others (mode %v)", name, dn, v.Secret.SecretName, v.Secret.DefaultMode)
						}
						// optional: the processes wait for their files, not
						// the kubelet for the Secret (CreateContainerConfigError)
						if v.Secret.Optional == nil || !*v.Secret.Optional {
							t.Errorf("%s: Deployment %s: Secret volume %s is not optional", name, dn, v.Secret.SecretName)
						}
						secretVols[m.MountPath] = v.Secret.SecretName
					}
				}
				for _, e := range c.Env {
					switch {
					case e.Name == "SLIPWAY_SECRET_MOUNTS":
						// which Secret each volume is, as the processes name them
						mounts, err := secretfile.ParseMounts(e.Value)
						if err != nil || !maps.Equal(mounts, secretfile.Mounts(secretVols)) {
							t.Errorf("%s: Deployment %s: SLIPWAY_SECRET_MOUNTS=%s (%v), want the Secret volumes %v", name, dn, e.Value, err, secretVols)
						}
					case strings.HasSuffix(e.Name, "_FILE"):
						if dir, _ := path.Split(e.Value); secretVols[strings.TrimSuffix(dir, "/")] == "" {
							t.Errorf("%s: Deployment %s: env %s=%s is not a file in a Secret volume (have %v)", name, dn, e.Name, e.Value, secretVols)
						}
					case secretish.MatchString(e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil):
						t.Errorf("%s: Deployment %s: env %s is not from a Secret", name, dn, e.Name)
					}
				}
				for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
					if strings.Contains(a, "postgres://") || strings.Contains(a, "password") || strings.Contains(a, "--db=") {
						t.Errorf("%s: Deployment %s: argument %q names a database or a password in argv", name, dn, a)
					}
					// the files a secret is read from: --db-file, --token-file,
					// and --pool-runtime's POOL=URL,TOKEN-FILE
					file := ""
					switch {
					case strings.HasPrefix(a, "--db-file="), strings.HasPrefix(a, "--token-file="):
						_, file, _ = strings.Cut(a, "=")
					case strings.HasPrefix(a, "--pool-runtime="):
						file = a[strings.LastIndex(a, ",")+1:]
					}
					if file == "" {
						continue
					}
					if dir, _ := path.Split(file); secretVols[strings.TrimSuffix(dir, "/")] == "" {
						t.Errorf("%s: Deployment %s: %s reads %s, which is not in a Secret volume (have %v)", name, dn, a, file, secretVols)
					}
				}
			}
			want := map[string]string{"slipway-control": "slipway-db slipway-git slipway-runtime-token", "slipway-runtime": "slipway-db slipway-git slipway-runtime-token"}[dn]
			got := slices.Sorted(maps.Values(secretVols))
			if strings.Join(got, " ") != want {
				t.Errorf("%s: Deployment %s mounts Secrets %v, want %s", name, dn, got, want)
			}
		}
	}
}
