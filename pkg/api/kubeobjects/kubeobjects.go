package kubeobjects

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
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
	// AnnotationOwner is a SandboxClaim's owner, on the claims Slipway
	// makes: the runtime's run id, or a rollout proof's id. The claim's
	// name is made from it; status and drain name a run by it.
	AnnotationOwner = "slipway.dev/owner"
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
)

// How a sandbox pod is confined: Pod Security "restricted"
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
const (
	// SandboxUID is the user (and SandboxGID the group, and the fsGroup of
	// the pod's volumes) every container of a sandbox pod runs as: the
	// runner, the commands it runs and the init container. Never root: the
	// pod sets runAsNonRoot, and a template's own USER is overridden.
	SandboxUID = 65532
	SandboxGID = 65532
	// EgressUID is the user of the egress proxy container of an
	// allow-list pool's pod (EgressContainer): another user than the
	// workload's, so the workload can neither signal it nor read its
	// memory.
	EgressUID = 65533
	// EgressContainer names the container of an allow-list pool's pod
	// running `slipway-runner egress` (from the runner image, pinned by
	// digest): the HTTP proxy at sandbox.EgressProxyAddr, in the pod's
	// network namespace, which HTTP_PROXY and HTTPS_PROXY of the workspace
	// container name. It writes every attempt as a JSON line on its
	// standard output (the container's log).
	EgressContainer = "slipway-egress"
	// WorkspaceVolumeDir is where the workspace container's working
	// directory is: an emptyDir owned by SandboxGID (fsGroup), since a
	// non-root user cannot write into the template's own folders.
	WorkspaceVolumeDir = "/workspace"
	// SeedInitContainer names the init container of the template's image
	// that copies the template's own WorkspaceVolumeDir into the
	// workspace emptyDir, mounted there at SeedDir (`slipway-runner seed`,
	// the runner from RunnerDir), before the workspace container hides
	// the template's folder under it.
	SeedInitContainer = "slipway-seed"
	SeedDir           = "/run/slipway/seed"
	// PodSecurityLevel is the Pod Security level of a namespace Slipway
	// renders, set by each of PodSecurityLabels.
	PodSecurityLevel = "restricted"
)

// The namespace labels by which the API server's PodSecurity admission
// enforces a level (refuses a pod that does not meet it), warns the
// client and audits. Slipway sets each to PodSecurityLevel on a namespace
// it renders.
const (
	LabelPodSecurityEnforce = "pod-security.kubernetes.io/enforce"
	LabelPodSecurityWarn    = "pod-security.kubernetes.io/warn"
	LabelPodSecurityAudit   = "pod-security.kubernetes.io/audit"
)

// PodSecurityLabels are the labels of a namespace that enforces, warns
// and audits PodSecurityLevel.
func PodSecurityLabels() map[string]string {
	return map[string]string{LabelPodSecurityEnforce: PodSecurityLevel, LabelPodSecurityWarn: PodSecurityLevel, LabelPodSecurityAudit: PodSecurityLevel}
}

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
