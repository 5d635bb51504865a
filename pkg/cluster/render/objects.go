package render

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// Volumes of the pods Slipway renders.
const (
	runnerVolume      = "slipway-runner"
	credentialsVolume = "slipway-credentials"
	secretVolume      = "slipway-secret"
	socketVolume      = "slipway-runner-socket"
	refreshVolume     = "slipway-refresh"
	workspaceVolume   = "slipway-workspace"
)

// podSecurityContext meets Pod Security "restricted" for the whole pod:
// never root (SandboxUID, whatever the template's USER says), the
// container runtime's default seccomp profile, and the volumes' group
// SandboxGID, so the workspace emptyDir is writable by the sandbox's
// user.
func podSecurityContext() map[string]any {
	return map[string]any{
		"runAsNonRoot":   true,
		"runAsUser":      kubeobjects.SandboxUID,
		"runAsGroup":     kubeobjects.SandboxGID,
		"fsGroup":        kubeobjects.SandboxGID,
		"seccompProfile": map[string]any{"type": "RuntimeDefault"},
	}
}

// containerSecurityContext meets Pod Security "restricted" for one
// container: no privilege escalation (no_new_privs: setuid binaries of the
// template do not raise privilege) and no capability at all.
func containerSecurityContext() map[string]any {
	return map[string]any{
		"allowPrivilegeEscalation": false,
		"capabilities":             map[string]any{"drop": []any{"ALL"}},
	}
}

var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// NodeImageLabelValue is the node label value that names node-image pin
// p: an id pin's id as it is (it must be a valid label value, like an
// AMI id), an image pin's digest as "sha256-" and its first 56 hex digits.
func NodeImageLabelValue(p generation.Pin) (string, error) {
	v := p.Identity()
	if p.Form() == generation.FormImage {
		v = strings.Replace(v, ":", "-", 1)
		if len(v) > 63 {
			v = v[:63]
		}
	}
	if !labelValue.MatchString(v) {
		return "", fmt.Errorf("nodeImage pin %s is not a Kubernetes label value", p)
	}
	return v, nil
}

var subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// meta is the metadata of a generation's object.
func meta(name, poolName, id, revision string) map[string]any {
	return map[string]any{
		"name":        name,
		"labels":      map[string]any{kubeobjects.LabelPool: poolName, kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(id)},
		"annotations": map[string]any{kubeobjects.AnnotationConfigRevision: revision, kubeobjects.AnnotationGenerationID: id},
	}
}

// sandboxTemplate is generation g's SandboxTemplate.
func sandboxTemplate(pl *pool.Pool, g *generation.Generation, revision string) (map[string]any, error) {
	poolName := pl.Metadata.Name
	file := pool.GenerationFile(poolName, g.ID)
	tmpl, ok := g.Pins[generation.WorkspaceTemplate]
	if !ok || tmpl.Form() != generation.FormImage {
		return nil, fmt.Errorf("%s: %w: no workspaceTemplate image pin to run", file, ErrRender)
	}
	run, ok := g.Pins[generation.Runner]
	if !ok || run.Form() != generation.FormImage {
		return nil, fmt.Errorf("%s: %w: no runner image pin to bring the runner from", file, ErrRender)
	}
	mounts := []any{
		map[string]any{"name": workspaceVolume, "mountPath": kubeobjects.WorkspaceVolumeDir},
		map[string]any{"name": runnerVolume, "mountPath": kubeobjects.RunnerDir, "readOnly": true},
		map[string]any{"name": socketVolume, "mountPath": kubeobjects.RunnerSocketDir},
		map[string]any{"name": refreshVolume, "mountPath": kubeobjects.MachineIDPath, "subPath": shape.MachineIDFile, "readOnly": true},
	}
	workspace := map[string]any{}
	if b, err := pl.Spec.Limits.Bounds(); err == nil && b.WorkspaceBytes > 0 {
		workspace["sizeLimit"] = strconv.FormatUint(b.WorkspaceBytes, 10)
	}
	volumes := []any{
		map[string]any{"name": workspaceVolume, "emptyDir": workspace},
		map[string]any{"name": runnerVolume, "emptyDir": map[string]any{}},
		map[string]any{"name": socketVolume, "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "1Mi"}},
		map[string]any{"name": refreshVolume, "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "1Mi"}},
	}
	if sv, ok := g.Pins[generation.SecretVersion]; ok {
		mounts = append(mounts,
			map[string]any{"name": credentialsVolume, "mountPath": sandbox.CredentialDir},
			map[string]any{"name": secretVolume, "mountPath": kubeobjects.SecretDir, "readOnly": true})
		volumes = append(volumes,
			map[string]any{"name": credentialsVolume, "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": kubeobjects.CredentialDirSize}},
			map[string]any{"name": secretVolume, "projected": map[string]any{
				"sources": []any{map[string]any{"secret": map[string]any{"name": kubeobjects.SecretName(sv.Identity())}}},
			}})
	}
	env := []any{
		map[string]any{"name": runner.EnvGeneration, "value": g.ID},
		map[string]any{"name": runner.EnvSandboxID, "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}},
	}
	containers := []any{map[string]any{
		"name":            kubeobjects.WorkspaceContainer,
		"image":           tmpl.Image,
		"command":         []any{kubeobjects.RunnerBinary, "serve", "--listen-unix", kubeobjects.RunnerSocket},
		"workingDir":      kubeobjects.WorkspaceVolumeDir,
		"volumeMounts":    mounts,
		"securityContext": containerSecurityContext(),
	}}
	if pl.Spec.Network.Mode == "allow-list" {
		env = append(env, proxyEnv()...)
		containers = append(containers, egressContainer(run.Image, pl.Spec.Network.Allow))
	}
	containers[0].(map[string]any)["env"] = env
	podSpec := map[string]any{
		"automountServiceAccountToken": false,
		"securityContext":              podSecurityContext(),
		"initContainers": []any{map[string]any{
			"name":    kubeobjects.RunnerInitContainer,
			"image":   run.Image,
			"command": []any{sandbox.RunnerPath, "install", kubeobjects.RunnerDir, "--refresh", kubeobjects.RefreshDir},
			"volumeMounts": []any{
				map[string]any{"name": runnerVolume, "mountPath": kubeobjects.RunnerDir},
				map[string]any{"name": refreshVolume, "mountPath": kubeobjects.RefreshDir},
			},
			"securityContext": containerSecurityContext(),
		}, map[string]any{
			"name":    kubeobjects.SeedInitContainer,
			"image":   tmpl.Image,
			"command": []any{kubeobjects.RunnerBinary, "seed", kubeobjects.WorkspaceVolumeDir, kubeobjects.SeedDir},
			"volumeMounts": []any{
				map[string]any{"name": runnerVolume, "mountPath": kubeobjects.RunnerDir, "readOnly": true},
				map[string]any{"name": workspaceVolume, "mountPath": kubeobjects.SeedDir},
			},
			"securityContext": containerSecurityContext(),
		}},
		"containers": containers,
		"volumes":    volumes,
	}
	if rc, ok := g.Pins[generation.RuntimeClass]; ok {
		name := rc.Identity()
		if len(name) > 253 || !subdomain.MatchString(name) {
			return nil, fmt.Errorf("%s: pins.runtimeClass: %w: %q cannot name a RuntimeClass (a DNS-1123 subdomain)", file, ErrRender, name)
		}
		podSpec["runtimeClassName"] = name
	}
	if k := pl.Spec.Kubernetes; k != nil && k.NodeImageLabel != "" {
		ni, ok := g.Pins[generation.NodeImage]
		if !ok {
			return nil, fmt.Errorf("%s: %w: pool %s schedules by node image (spec.kubernetes.nodeImageLabel) but the generation pins no nodeImage", file, ErrRender, poolName)
		}
		v, err := NodeImageLabelValue(ni)
		if err != nil {
			return nil, fmt.Errorf("%s: pins.nodeImage: %w: %v", file, ErrRender, err)
		}
		podSpec["nodeSelector"] = map[string]any{k.NodeImageLabel: v}
	}
	np, err := networkPolicy(pl)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion,
		"kind":       kubeobjects.KindSandboxTemplate,
		"metadata":   meta(kubeobjects.ObjectName(poolName, g.ID), poolName, g.ID, revision),
		"spec": map[string]any{
			"podTemplate": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{kubeobjects.LabelPool: poolName, kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(g.ID)}},
				"spec":     podSpec,
			},
			"networkPolicyManagement": "Managed",
			"networkPolicy":           np,
		},
	}, nil
}

// networkPolicy is the template's networkPolicy: no ingress, and egress
// only to the pool's allow-list (none for deny). A SandboxTemplate's policy
// selects by address, so an entry must be IP:port or CIDR:port.
func networkPolicy(pl *pool.Pool) (map[string]any, error) {
	np := map[string]any{"ingress": []any{}, "egress": []any{}}
	if pl.Spec.Network.Mode != "allow-list" {
		return np, nil
	}
	egress := []any{}
	for i, entry := range pl.Spec.Network.Allow {
		host, port, err := net.SplitHostPort(entry)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s: spec.network.allow[%d]: %w: %q is not HOST:PORT", pool.PoolFile(pl.Metadata.Name), i, ErrRender, entry)
		}
		prefix, err := netip.ParsePrefix(host)
		if err != nil {
			addr, aerr := netip.ParseAddr(host)
			if aerr != nil {
				return nil, fmt.Errorf("%s: spec.network.allow[%d]: %w: %q names a host, and a Kubernetes network policy selects by address: write IP:PORT or CIDR:PORT", pool.PoolFile(pl.Metadata.Name), i, ErrRender, entry)
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		egress = append(egress, map[string]any{
			"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": prefix.Masked().String()}}},
			"ports": []any{map[string]any{"protocol": "TCP", "port": n}},
		})
	}
	np["egress"] = egress
	return np, nil
}

// egressContainer is the egress proxy of an allow-list pool's pod: the
// runner image's binary serving `egress` on sandbox.EgressProxyAddr, in
// the pod's network namespace, as EgressUID (not the workload's user).
// It enforces the allow-list for what goes through it and records every
// attempt in its log; what does not go through it is left to the
// template's NetworkPolicy, which allows the same destinations only.
func egressContainer(image string, allow []string) map[string]any {
	sc := containerSecurityContext()
	sc["runAsUser"], sc["runAsGroup"] = kubeobjects.EgressUID, kubeobjects.EgressUID
	sc["readOnlyRootFilesystem"] = true
	return map[string]any{
		"name":            kubeobjects.EgressContainer,
		"image":           image,
		"command":         []any{sandbox.RunnerPath, "egress", "--listen", sandbox.EgressProxyAddr, "--allow", strings.Join(allow, ",")},
		"securityContext": sc,
	}
}

// proxyEnv names the egress proxy to every program of the workspace
// container that honours the usual variables (curl, pip, git, Go, ...);
// loopback stays direct. The local backend sets the same.
func proxyEnv() []any {
	u := "http://" + sandbox.EgressProxyAddr
	var env []any
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env = append(env, map[string]any{"name": k, "value": u})
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		env = append(env, map[string]any{"name": k, "value": "localhost,127.0.0.1,::1"})
	}
	return env
}

// sandboxWarmPool is the warm pool of generation id with replicas members.
func sandboxWarmPool(poolName, id, revision string, replicas int) map[string]any {
	name := kubeobjects.ObjectName(poolName, id)
	return map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion,
		"kind":       kubeobjects.KindSandboxWarmPool,
		"metadata":   meta(name, poolName, id, revision),
		"spec": map[string]any{
			"replicas":           replicas,
			"sandboxTemplateRef": map[string]any{"name": name},
			"updateStrategy":     map[string]any{"type": "OnReplenish"},
		},
	}
}
