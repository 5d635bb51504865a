package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// Labels and annotations Slipway puts on what it renders.
const (
	// LabelPool names the pool, on every rendered object.
	LabelPool = "slipway.dev/pool"
	// LabelGeneration names the generation (its id cut to 63 characters,
	// the limit of a label value) on the objects of one generation and on
	// their pods. It never changes on an object: a generation is new
	// objects.
	LabelGeneration = "slipway.dev/generation"
	// AnnotationGenerationID is the generation's full id.
	AnnotationGenerationID = "slipway.dev/generation-id"
	// AnnotationConfigRevision is the config repository commit rendered,
	// on every rendered object.
	AnnotationConfigRevision = "slipway.dev/config-revision"
	// AnnotationSyncWave is Argo CD's sync wave: a generation's
	// SandboxTemplate is applied (and healthy) before its
	// SandboxWarmPool. Slipway sets it after the kustomize build, so a
	// kustomization cannot reorder the two.
	AnnotationSyncWave = "argocd.argoproj.io/sync-wave"
	WaveTemplate       = "1"
	WaveWarmPool       = "2"
)

// The agent-sandbox API Slipway renders to (sigs.k8s.io/agent-sandbox v0.5.6).
const (
	ExtensionsAPIVersion = "extensions.agents.x-k8s.io/v1beta1"
	KindSandboxTemplate  = "SandboxTemplate"
	KindSandboxWarmPool  = "SandboxWarmPool"
)

// Where the pod finds Slipway's parts.
const (
	// RunnerDir is the read-only folder of the workspace container holding
	// the runner binary, copied there from the runner image by the init
	// container (slipway-runner install).
	RunnerDir = "/opt/slipway/bin"
	// WorkspaceContainer and RunnerInitContainer name the pod's containers.
	WorkspaceContainer  = "workspace"
	RunnerInitContainer = "slipway-runner"
	runnerVolume        = "slipway-runner"
	credentialsVolume   = "slipway-credentials"
	secretVolume        = "slipway-secret"
	socketVolume        = "slipway-runner-socket"
	// RunnerSocketDir is a small emptyDir of the workspace container
	// holding RunnerSocket, where the runner (the container's command)
	// serves the runner protocol. Nothing listens on the pod's network:
	// the runtime reaches it through the API server's pod exec of
	// `slipway-runner connect RunnerSocket` (package kubesandbox).
	RunnerSocketDir = "/run/slipway/runner"
	RunnerSocket    = RunnerSocketDir + "/runner.sock"
	// RunnerBinary is the runner's path in the workspace container.
	RunnerBinary = RunnerDir + "/slipway-runner"
	// SecretDir is where the workspace container of a generation that
	// pins a secretVersion finds the projected Secret of that version
	// (SecretName), read-only. It is not sandbox.CredentialDir: that is a
	// writable memory emptyDir of its own, where the runtime puts each
	// claim's token through pod exec after the claim (package
	// kubesandbox), since a warm member is made before anyone claims it.
	SecretDir = "/run/slipway/secret"
	// CredentialDirSize is the sizeLimit of the memory emptyDir at
	// sandbox.CredentialDir.
	CredentialDirSize = "1Mi"
	// RefreshDir is where the init container (slipway-runner install
	// --refresh) writes the pod's refresh phase (shape.RefreshPod), a
	// small memory emptyDir: its machine-id is mounted read-only over
	// /etc/machine-id of the workspace container, so every pod has a
	// fresh one as every local sandbox does. No random seed and no ssh
	// host keys on Kubernetes: the init container cannot see the
	// template's files.
	RefreshDir    = "/run/slipway/refresh"
	MachineIDPath = "/etc/machine-id"
	refreshVolume = "slipway-refresh"
)

// GenerationLabel is the value of LabelGeneration for generation id.
func GenerationLabel(id string) string {
	if len(id) > 63 {
		return id[:63]
	}
	return id
}

// ObjectName names a generation's SandboxTemplate and SandboxWarmPool:
// the pool's name and the first 12 hex digits of the generation's id.
func ObjectName(poolName, id string) string {
	h := strings.TrimPrefix(id, "g-")
	if len(h) > 12 {
		h = h[:12]
	}
	return poolName + "-" + h
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// SecretName is the name of the Secret holding secret version id (a
// secretVersion pin's id, such as vault://kv/agents/token#7): the id
// lower-cased with every run of other characters than a-z and 0-9 turned
// into '-', cut to 40 characters, then '-' and the first 8 hex digits of
// the id's sha256, so that two ids never share a Secret:
// vault://kv/agents/token#7 is vault-kv-agents-token-7-<8 hex>. Whatever
// syncs secrets into the cluster creates it under that name.
func SecretName(id string) string {
	s := strings.Trim(nonName.ReplaceAllString(strings.ToLower(id), "-"), "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	sum := sha256.Sum256([]byte(id))
	if s == "" {
		return "secret-" + hex.EncodeToString(sum[:4])
	}
	return s + "-" + hex.EncodeToString(sum[:4])
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
		"labels":      map[string]any{LabelPool: poolName, LabelGeneration: GenerationLabel(id)},
		"annotations": map[string]any{AnnotationConfigRevision: revision, AnnotationGenerationID: id},
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
		map[string]any{"name": runnerVolume, "mountPath": RunnerDir, "readOnly": true},
		map[string]any{"name": socketVolume, "mountPath": RunnerSocketDir},
		map[string]any{"name": refreshVolume, "mountPath": MachineIDPath, "subPath": shape.MachineIDFile, "readOnly": true},
	}
	volumes := []any{
		map[string]any{"name": runnerVolume, "emptyDir": map[string]any{}},
		map[string]any{"name": socketVolume, "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "1Mi"}},
		map[string]any{"name": refreshVolume, "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "1Mi"}},
	}
	if sv, ok := g.Pins[generation.SecretVersion]; ok {
		mounts = append(mounts,
			map[string]any{"name": credentialsVolume, "mountPath": sandbox.CredentialDir},
			map[string]any{"name": secretVolume, "mountPath": SecretDir, "readOnly": true})
		volumes = append(volumes,
			map[string]any{"name": credentialsVolume, "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": CredentialDirSize}},
			map[string]any{"name": secretVolume, "projected": map[string]any{
				"sources": []any{map[string]any{"secret": map[string]any{"name": SecretName(sv.Identity())}}},
			}})
	}
	podSpec := map[string]any{
		"automountServiceAccountToken": false,
		"initContainers": []any{map[string]any{
			"name":    RunnerInitContainer,
			"image":   run.Image,
			"command": []any{sandbox.RunnerPath, "install", RunnerDir, "--refresh", RefreshDir},
			"volumeMounts": []any{
				map[string]any{"name": runnerVolume, "mountPath": RunnerDir},
				map[string]any{"name": refreshVolume, "mountPath": RefreshDir},
			},
		}},
		"containers": []any{map[string]any{
			"name":    WorkspaceContainer,
			"image":   tmpl.Image,
			"command": []any{RunnerBinary, "serve", "--listen-unix", RunnerSocket},
			"env": []any{
				map[string]any{"name": runner.EnvGeneration, "value": g.ID},
				map[string]any{"name": runner.EnvSandboxID, "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}},
			},
			"volumeMounts": mounts,
		}},
		"volumes": volumes,
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
		"apiVersion": ExtensionsAPIVersion,
		"kind":       KindSandboxTemplate,
		"metadata":   meta(ObjectName(poolName, g.ID), poolName, g.ID, revision),
		"spec": map[string]any{
			"podTemplate": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{LabelPool: poolName, LabelGeneration: GenerationLabel(g.ID)}},
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

// sandboxWarmPool is the warm pool of generation id with replicas members.
func sandboxWarmPool(poolName, id, revision string, replicas int) map[string]any {
	name := ObjectName(poolName, id)
	return map[string]any{
		"apiVersion": ExtensionsAPIVersion,
		"kind":       KindSandboxWarmPool,
		"metadata":   meta(name, poolName, id, revision),
		"spec": map[string]any{
			"replicas":           replicas,
			"sandboxTemplateRef": map[string]any{"name": name},
			"updateStrategy":     map[string]any{"type": "OnReplenish"},
		},
	}
}
