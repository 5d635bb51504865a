package pin

import (
	"cmp"
	"slices"
	"strings"
)

// reach is what a known path leads to.
type reach int

const (
	podSpecAt   reach = iota // a pod spec: its containers, initContainers and ephemeralContainers
	containerAt              // a container object: its image and imagePullPolicy
	imageAt                  // an image string
)

// known says where the kinds of some API groups keep images. Paths are in
// the syntax of FieldSpec.Path.
type known struct {
	groups     []string // "" is the core group
	kinds      []string
	pods       []string
	containers []string
	images     []string
}

// Path builders for structures that several kinds embed.

func under(prefix string, paths ...string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = prefix + "." + p
	}
	return out
}

// argoTemplate: the containers of an Argo Workflows template.
func argoTemplate(prefix string) []string {
	return under(prefix, "container", "script", "containerSet.containers[]", "initContainers[]", "sidecars[]")
}

// argoTemplates: the templates of an Argo WorkflowSpec, and its defaults.
func argoTemplates(spec string) []string {
	return append(argoTemplate(spec+".templates[]"), argoTemplate(spec+".templateDefaults")...)
}

// tektonTask: the containers of a Tekton TaskSpec.
func tektonTask(prefix string) []string {
	return under(prefix, "steps[]", "sidecars[]", "stepTemplate")
}

// tektonPipeline: the embedded tasks of a Tekton PipelineSpec.
func tektonPipeline(prefix string) []string {
	return append(tektonTask(prefix+".tasks[].taskSpec"), tektonTask(prefix+".finally[].taskSpec")...)
}

// rayCluster: the pod specs of a Ray RayClusterSpec.
func rayCluster(prefix string) []string {
	return under(prefix, "headGroupSpec.template.spec", "workerGroupSpecs[].template.spec")
}

// sparkApp: a Spark operator SparkApplicationSpec's images, containers and pod specs.
func sparkApp(prefix string) (images, containers, pods []string) {
	return under(prefix, "image", "initContainerImage", "driver.image", "executor.image"),
		under(prefix, "driver.sidecars[]", "driver.initContainers[]", "executor.sidecars[]", "executor.initContainers[]"),
		under(prefix, "driver.template.spec", "executor.template.spec")
}

func knownTable() []known {
	sparkImages, sparkContainers, sparkPods := sparkApp("spec")
	schedImages, schedContainers, schedPods := sparkApp("spec.template")
	return []known{
		// Kubernetes.
		{groups: []string{""}, kinds: []string{"Pod"}, pods: []string{"spec"}},
		{groups: []string{""}, kinds: []string{"ReplicationController"}, pods: []string{"spec.template.spec"}},
		{groups: []string{""}, kinds: []string{"PodTemplate"}, pods: []string{"template.spec"}},
		{groups: []string{"apps", "extensions"}, kinds: []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"}, pods: []string{"spec.template.spec"}},
		{groups: []string{"batch"}, kinds: []string{"Job"}, pods: []string{"spec.template.spec"}},
		{groups: []string{"batch"}, kinds: []string{"CronJob"}, pods: []string{"spec.jobTemplate.spec.template.spec"}},

		// agent-sandbox. A v1beta1 SandboxWarmPool only names a
		// SandboxTemplate (sandboxTemplateRef); the first v1alpha1 one
		// embedded spec.podTemplate. SandboxClaim holds no image.
		{groups: []string{"agents.x-k8s.io"}, kinds: []string{"Sandbox"}, pods: []string{"spec.podTemplate.spec"}},
		{groups: []string{"extensions.agents.x-k8s.io"}, kinds: []string{"SandboxTemplate", "SandboxWarmPool"}, pods: []string{"spec.podTemplate.spec"}},

		// Argo Rollouts (an analysis's job metric embeds a JobSpec) and
		// Argo Workflows, Argo Events.
		{groups: []string{"argoproj.io"}, kinds: []string{"Rollout"}, pods: []string{"spec.template.spec"}},
		{groups: []string{"argoproj.io"}, kinds: []string{"AnalysisTemplate", "ClusterAnalysisTemplate", "AnalysisRun"}, pods: []string{"spec.metrics[].provider.job.spec.template.spec"}},
		{groups: []string{"argoproj.io"}, kinds: []string{"Experiment"}, pods: []string{"spec.templates[].template.spec"}},
		{groups: []string{"argoproj.io"}, kinds: []string{"Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate"}, containers: argoTemplates("spec")},
		{groups: []string{"argoproj.io"}, kinds: []string{"CronWorkflow"}, containers: argoTemplates("spec.workflowSpec")},
		{groups: []string{"argoproj.io"}, kinds: []string{"Sensor", "EventSource"}, containers: []string{"spec.template.container"}},

		// Tekton: steps, sidecars and the step template of every task spec.
		{groups: []string{"tekton.dev"}, kinds: []string{"Task", "ClusterTask"}, containers: tektonTask("spec")},
		{groups: []string{"tekton.dev"}, kinds: []string{"TaskRun"}, containers: tektonTask("spec.taskSpec")},
		{groups: []string{"tekton.dev"}, kinds: []string{"Pipeline"}, containers: tektonPipeline("spec")},
		{groups: []string{"tekton.dev"}, kinds: []string{"PipelineRun"}, containers: tektonPipeline("spec.pipelineSpec")},
		{groups: []string{"tekton.dev"}, kinds: []string{"StepAction"}, containers: []string{"spec"}},

		// Knative.
		{groups: []string{"serving.knative.dev"}, kinds: []string{"Service", "Configuration"}, pods: []string{"spec.template.spec"}},
		{groups: []string{"serving.knative.dev"}, kinds: []string{"Revision"}, pods: []string{"spec"}},
		{groups: []string{"sources.knative.dev"}, kinds: []string{"ContainerSource"}, pods: []string{"spec.template.spec"}},

		// KEDA.
		{groups: []string{"keda.sh"}, kinds: []string{"ScaledJob"}, pods: []string{"spec.jobTargetRef.template.spec"}},

		// Ray.
		{groups: []string{"ray.io"}, kinds: []string{"RayCluster"}, pods: rayCluster("spec")},
		{groups: []string{"ray.io"}, kinds: []string{"RayJob"}, pods: append(rayCluster("spec.rayClusterSpec"), "spec.submitterPodTemplate.spec")},
		{groups: []string{"ray.io"}, kinds: []string{"RayService"}, pods: rayCluster("spec.rayClusterConfig")},

		// Kubeflow training operators, Trainer, Notebooks; JobSet.
		{groups: []string{"kubeflow.org"}, kinds: []string{"PyTorchJob"}, pods: []string{"spec.pytorchReplicaSpecs.*.template.spec"}},
		{groups: []string{"kubeflow.org"}, kinds: []string{"TFJob"}, pods: []string{"spec.tfReplicaSpecs.*.template.spec"}},
		{groups: []string{"kubeflow.org"}, kinds: []string{"MPIJob"}, pods: []string{"spec.mpiReplicaSpecs.*.template.spec"}},
		{groups: []string{"kubeflow.org"}, kinds: []string{"XGBoostJob"}, pods: []string{"spec.xgbReplicaSpecs.*.template.spec"}},
		{groups: []string{"kubeflow.org"}, kinds: []string{"PaddleJob"}, pods: []string{"spec.paddleReplicaSpecs.*.template.spec"}},
		{groups: []string{"kubeflow.org"}, kinds: []string{"JAXJob"}, pods: []string{"spec.jaxReplicaSpecs.*.template.spec"}},
		{groups: []string{"kubeflow.org"}, kinds: []string{"MXJob"}, pods: []string{"spec.mxReplicaSpecs.*.template.spec"}},
		{groups: []string{"kubeflow.org"}, kinds: []string{"Notebook"}, pods: []string{"spec.template.spec"}},
		{groups: []string{"trainer.kubeflow.org"}, kinds: []string{"TrainJob"}, images: []string{"spec.trainer.image"}},
		{groups: []string{"trainer.kubeflow.org"}, kinds: []string{"TrainingRuntime", "ClusterTrainingRuntime"}, pods: []string{"spec.template.spec.replicatedJobs[].template.spec.template.spec"}},
		{groups: []string{"jobset.x-k8s.io"}, kinds: []string{"JobSet"}, pods: []string{"spec.replicatedJobs[].template.spec.template.spec"}},

		// Flink and Spark operators.
		{groups: []string{"flink.apache.org"}, kinds: []string{"FlinkDeployment"}, images: []string{"spec.image"},
			pods: []string{"spec.podTemplate.spec", "spec.jobManager.podTemplate.spec", "spec.taskManager.podTemplate.spec"}},
		{groups: []string{"sparkoperator.k8s.io"}, kinds: []string{"SparkApplication"}, images: sparkImages, containers: sparkContainers, pods: sparkPods},
		{groups: []string{"sparkoperator.k8s.io"}, kinds: []string{"ScheduledSparkApplication"}, images: schedImages, containers: schedContainers, pods: schedPods},

		// Other widely used workload operators.
		{groups: []string{"batch.volcano.sh"}, kinds: []string{"Job"}, pods: []string{"spec.tasks[].template.spec"}},
		{groups: []string{"apps.kruise.io"}, kinds: []string{"CloneSet", "StatefulSet", "DaemonSet", "BroadcastJob"}, pods: []string{"spec.template.spec"}},
		{groups: []string{"apps.kruise.io"}, kinds: []string{"AdvancedCronJob"}, pods: []string{"spec.template.jobTemplate.spec.template.spec", "spec.template.broadcastJobTemplate.spec.template.spec"}},
		{groups: []string{"apps.openshift.io"}, kinds: []string{"DeploymentConfig"}, pods: []string{"spec.template.spec"}},
		{groups: []string{"monitoring.coreos.com"}, kinds: []string{"Prometheus", "PrometheusAgent", "Alertmanager", "ThanosRuler"}, images: []string{"spec.image"}, pods: []string{"spec"}},
		{groups: []string{"serving.kserve.io"}, kinds: []string{"InferenceService"},
			pods:       []string{"spec.predictor", "spec.transformer", "spec.explainer"},
			containers: []string{"spec.predictor.*", "spec.transformer.*", "spec.explainer.*"}},
		{groups: []string{"serving.kserve.io"}, kinds: []string{"ServingRuntime", "ClusterServingRuntime"}, pods: []string{"spec"}},
	}
}

// knownPath is a compiled path of a known kind.
type knownPath struct {
	segs []segment
	to   reach
}

// knownRule is where the kinds of some API groups keep images.
type knownRule struct {
	groups []string
	paths  []knownPath
}

// knownKinds maps a kind to its rules; it is computed once and never changed.
var knownKinds = compileKnown(knownTable())

func compileKnown(table []known) map[string][]knownRule {
	out := map[string][]knownRule{}
	for _, k := range table {
		var paths []knownPath
		for _, set := range []struct {
			paths []string
			to    reach
		}{{k.pods, podSpecAt}, {k.containers, containerAt}, {k.images, imageAt}} {
			for _, p := range set.paths {
				segs, err := parsePath(p)
				if err != nil {
					panic("pin: known kinds: " + err.Error()) // a mistake in knownTable, caught by every test
				}
				paths = append(paths, knownPath{segs: segs, to: set.to})
			}
		}
		for _, kind := range k.kinds {
			out[kind] = append(out[kind], knownRule{groups: k.groups, paths: paths})
		}
	}
	return out
}

// apiGroup is the group of an apiVersion: "apps" of "apps/v1", "" of "v1".
func apiGroup(apiVersion string) string {
	group, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return group
}

// applies says whether r covers an object of apiVersion: one without
// apiVersion matches by kind alone.
func (r knownRule) applies(apiVersion string) bool {
	return apiVersion == "" || slices.Contains(r.groups, apiGroup(apiVersion))
}

// KnownKinds lists the kinds whose image fields Find knows by name, each
// as group/Kind ("apps/Deployment"; "Pod" for the core group), sorted.
// Kustomization and Component (kustomize.config.k8s.io) are known as well:
// their images lists are read.
func KnownKinds() []string {
	var out []string
	for kind, rules := range knownKinds {
		for _, r := range rules {
			for _, g := range r.groups {
				if g == "" {
					out = append(out, kind)
				} else {
					out = append(out, g+"/"+kind)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(a, b) })
	return slices.Compact(out)
}
