package pin

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestKnownKinds finds the images of every kind known by name, in manifests
// written for this test, each as "path value", all found by kind.
func TestKnownKinds(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{
			name: "agent-sandbox Sandbox",
			yaml: `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: dev}
spec:
  podTemplate:
    metadata:
      labels: {team: a}
    spec:
      initContainers:
      - name: clone
        image: alpine/git
      containers:
      - name: shell
        image: busybox
  volumeClaimTemplates:
  - metadata: {name: work}
    spec: {accessModes: [ReadWriteOnce]}
`,
			want: []string{"spec.podTemplate.spec.containers[0].image busybox", "spec.podTemplate.spec.initContainers[0].image alpine/git"},
		},
		{
			name: "agent-sandbox SandboxTemplate",
			yaml: `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: python}
spec:
  networkPolicyManagement: Managed
  podTemplate:
    spec:
      containers:
      - name: runtime
        image: python:3.12-slim
        imagePullPolicy: IfNotPresent
`,
			want: []string{"spec.podTemplate.spec.containers[0].image python:3.12-slim"},
		},
		{
			name: "agent-sandbox SandboxWarmPool: v1beta1 names a template, the first v1alpha1 embedded one",
			yaml: `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: warm}
spec:
  replicas: 3
  sandboxTemplateRef: {name: python}
---
apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxWarmPool
metadata: {name: old}
spec:
  replicas: 1
  podTemplate:
    spec:
      containers: [{name: a, image: "python:3.11"}]
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: c}
spec:
  warmPoolRef: {name: warm}
`,
			want: []string{"spec.podTemplate.spec.containers[0].image python:3.11"},
		},
		{
			name: "Argo Rollout",
			yaml: `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web}
spec:
  strategy:
    blueGreen: {activeService: web}
  template:
    spec:
      containers:
      - name: web
        image: nginx:1.25
`,
			want: []string{"spec.template.spec.containers[0].image nginx:1.25"},
		},
		{
			name: "Argo AnalysisTemplate, ClusterAnalysisTemplate and AnalysisRun job metrics",
			yaml: `apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: smoke}
spec:
  args: [{name: host}]
  metrics:
  - name: prometheus
    provider:
      prometheus: {address: "http://prom:9090", query: up}
  - name: curl
    provider:
      job:
        spec:
          backoffLimit: 1
          template:
            spec:
              restartPolicy: Never
              containers:
              - name: curl
                image: alpine:latest
                command: [wget, -q, "{{args.host}}"]
---
apiVersion: argoproj.io/v1alpha1
kind: ClusterAnalysisTemplate
metadata: {name: shared}
spec:
  metrics:
  - name: check
    provider: {job: {spec: {template: {spec: {containers: [{name: c, image: "busybox:1.36"}]}}}}}
---
apiVersion: argoproj.io/v1alpha1
kind: AnalysisRun
metadata: {name: run-1}
spec:
  metrics:
  - name: check
    provider: {job: {spec: {template: {spec: {containers: [{name: c, image: "redis:7"}]}}}}}
`,
			want: []string{
				"spec.metrics[1].provider.job.spec.template.spec.containers[0].image alpine:latest",
				"spec.metrics[0].provider.job.spec.template.spec.containers[0].image busybox:1.36",
				"spec.metrics[0].provider.job.spec.template.spec.containers[0].image redis:7",
			},
		},
		{
			name: "Argo Experiment",
			yaml: `apiVersion: argoproj.io/v1alpha1
kind: Experiment
metadata: {name: ab}
spec:
  templates:
  - name: baseline
    selector: {matchLabels: {app: a}}
    template:
      spec:
        containers: [{name: a, image: "nginx:1.25"}]
`,
			want: []string{"spec.templates[0].template.spec.containers[0].image nginx:1.25"},
		},
		{
			name: "Argo Workflow templates: container, script, containerSet, init containers, sidecars, defaults",
			yaml: `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: build-}
spec:
  entrypoint: main
  templateDefaults:
    container:
      image: busybox:1.36
  templates:
  - name: main
    steps:
    - - name: test
        template: test
  - name: test
    container:
      image: golang:1.26
      command: [go, test, ./...]
  - name: report
    script:
      image: python:3.12-slim
      source: print("ok")
  - name: set
    containerSet:
      containers:
      - name: a
        image: alpine:3.20
    initContainers:
    - name: fetch
      image: alpine/git
    sidecars:
    - name: db
      image: postgres:16
`,
			want: []string{
				"spec.templates[1].container.image golang:1.26",
				"spec.templates[2].script.image python:3.12-slim",
				"spec.templates[3].containerSet.containers[0].image alpine:3.20",
				"spec.templates[3].initContainers[0].image alpine/git",
				"spec.templates[3].sidecars[0].image postgres:16",
				"spec.templateDefaults.container.image busybox:1.36",
			},
		},
		{
			name: "Argo WorkflowTemplate, ClusterWorkflowTemplate, CronWorkflow",
			yaml: `apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata: {name: t}
spec:
  templates:
  - name: a
    container: {image: "alpine:3.20"}
---
apiVersion: argoproj.io/v1alpha1
kind: ClusterWorkflowTemplate
metadata: {name: ct}
spec:
  templates:
  - name: a
    script: {image: "python:3.12-slim", source: "1"}
---
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: nightly}
spec:
  schedule: "0 2 * * *"
  workflowSpec:
    entrypoint: a
    templates:
    - name: a
      container: {image: "redis:7"}
`,
			want: []string{
				"spec.templates[0].container.image alpine:3.20",
				"spec.templates[0].script.image python:3.12-slim",
				"spec.workflowSpec.templates[0].container.image redis:7",
			},
		},
		{
			name: "Argo Events Sensor and EventSource",
			yaml: `apiVersion: argoproj.io/v1alpha1
kind: Sensor
metadata: {name: s}
spec:
  template:
    container: {image: "busybox:1.36"}
---
apiVersion: argoproj.io/v1alpha1
kind: EventSource
metadata: {name: e}
spec:
  template:
    container: {image: "alpine:3.20"}
`,
			want: []string{"spec.template.container.image busybox:1.36", "spec.template.container.image alpine:3.20"},
		},
		{
			name: "Tekton Task and ClusterTask: steps, sidecars, step template",
			yaml: `apiVersion: tekton.dev/v1
kind: Task
metadata: {name: build}
spec:
  params: [{name: image}]
  stepTemplate:
    image: alpine:3.20
    env: [{name: HOME, value: /workspace}]
  steps:
  - name: compile
    image: golang:1.26
    script: go build ./...
  - name: default-image
    script: echo uses the step template
  sidecars:
  - name: docker
    image: docker:27-dind
---
apiVersion: tekton.dev/v1beta1
kind: ClusterTask
metadata: {name: ct}
spec:
  steps:
  - {name: a, image: "busybox:1.36"}
`,
			want: []string{
				"spec.steps[0].image golang:1.26",
				"spec.sidecars[0].image docker:27-dind",
				"spec.stepTemplate.image alpine:3.20",
				"spec.steps[0].image busybox:1.36",
			},
		},
		{
			name: "Tekton TaskRun, Pipeline, PipelineRun, StepAction",
			yaml: `apiVersion: tekton.dev/v1
kind: TaskRun
metadata: {name: tr}
spec:
  taskSpec:
    steps:
    - {name: a, image: "alpine:3.20"}
---
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: p}
spec:
  tasks:
  - name: ref
    taskRef: {name: build}
  - name: inline
    taskSpec:
      steps:
      - {name: a, image: "golang:1.26"}
  finally:
  - name: notify
    taskSpec:
      sidecars:
      - {name: s, image: "redis:7"}
---
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: pr}
spec:
  pipelineSpec:
    tasks:
    - name: inline
      taskSpec:
        stepTemplate: {image: "busybox:1.36"}
        steps:
        - {name: a, script: "true"}
---
apiVersion: tekton.dev/v1beta1
kind: StepAction
metadata: {name: git-clone}
spec:
  image: alpine/git
  script: git clone "$(params.url)"
`,
			want: []string{
				"spec.taskSpec.steps[0].image alpine:3.20",
				"spec.tasks[1].taskSpec.steps[0].image golang:1.26",
				"spec.finally[0].taskSpec.sidecars[0].image redis:7",
				"spec.pipelineSpec.tasks[0].taskSpec.stepTemplate.image busybox:1.36",
				"spec.image alpine/git",
			},
		},
		{
			name: "Knative Service, Configuration, Revision, ContainerSource; a core Service is not one",
			yaml: `apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: hello}
spec:
  template:
    metadata:
      annotations: {autoscaling.knative.dev/target: "10"}
    spec:
      containers:
      - image: ghcr.io/example/hello:1.0
        ports: [{containerPort: 8080}]
---
apiVersion: serving.knative.dev/v1
kind: Configuration
metadata: {name: c}
spec:
  template:
    spec:
      containers: [{image: "nginx:1.25"}]
---
apiVersion: serving.knative.dev/v1
kind: Revision
metadata: {name: r}
spec:
  containers: [{image: "redis:7"}]
---
apiVersion: sources.knative.dev/v1
kind: ContainerSource
metadata: {name: heartbeat}
spec:
  template:
    spec:
      containers: [{name: beat, image: "busybox:1.36"}]
---
apiVersion: v1
kind: Service
metadata: {name: plain}
spec:
  template: {spec: {containers: [{image: "not-a-knative:1"}]}}
`,
			want: []string{
				"spec.template.spec.containers[0].image ghcr.io/example/hello:1.0",
				"spec.template.spec.containers[0].image nginx:1.25",
				"spec.containers[0].image redis:7",
				"spec.template.spec.containers[0].image busybox:1.36",
			},
		},
		{
			name: "KEDA ScaledJob",
			yaml: `apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: {name: consumer}
spec:
  jobTargetRef:
    parallelism: 1
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: consume
          image: ghcr.io/example/consumer:2.1
  triggers:
  - type: rabbitmq
    metadata: {queueName: jobs}
`,
			want: []string{"spec.jobTargetRef.template.spec.containers[0].image ghcr.io/example/consumer:2.1"},
		},
		{
			name: "Ray RayCluster, RayJob, RayService",
			yaml: `apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: rc}
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers: [{name: head, image: "rayproject/ray:2.40.0"}]
  workerGroupSpecs:
  - groupName: cpu
    template:
      spec:
        containers: [{name: w, image: "rayproject/ray:2.40.0-py311"}]
---
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: rj}
spec:
  entrypoint: python /app/train.py
  rayClusterSpec:
    headGroupSpec:
      template:
        spec:
          containers: [{name: head, image: "rayproject/ray:2.41.0"}]
    workerGroupSpecs:
    - groupName: gpu
      template:
        spec:
          initContainers: [{name: wait, image: "busybox:1.36"}]
          containers: [{name: w, image: "rayproject/ray:2.41.0-gpu"}]
  submitterPodTemplate:
    spec:
      containers: [{name: submit, image: "rayproject/ray:2.41.0"}]
---
apiVersion: ray.io/v1
kind: RayService
metadata: {name: rs}
spec:
  serveConfigV2: |
    applications: []
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers: [{name: head, image: "rayproject/ray:2.42.0"}]
`,
			want: []string{
				"spec.headGroupSpec.template.spec.containers[0].image rayproject/ray:2.40.0",
				"spec.workerGroupSpecs[0].template.spec.containers[0].image rayproject/ray:2.40.0-py311",
				"spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].image rayproject/ray:2.41.0",
				"spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].image rayproject/ray:2.41.0-gpu",
				"spec.rayClusterSpec.workerGroupSpecs[0].template.spec.initContainers[0].image busybox:1.36",
				"spec.submitterPodTemplate.spec.containers[0].image rayproject/ray:2.41.0",
				"spec.rayClusterConfig.headGroupSpec.template.spec.containers[0].image rayproject/ray:2.42.0",
			},
		},
		{
			name: "Kubeflow training jobs: every replica type",
			yaml: `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: pytorch, image: "ghcr.io/example/train:3"}]
---
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: tf}
spec:
  tfReplicaSpecs:
    PS: {template: {spec: {containers: [{name: tensorflow, image: "tensorflow/tensorflow:2.18.0"}]}}}
---
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: mpi}
spec:
  mpiReplicaSpecs:
    Launcher: {template: {spec: {containers: [{name: l, image: "mpioperator/mpi-pi:openmpi"}]}}}
---
apiVersion: kubeflow.org/v1
kind: XGBoostJob
metadata: {name: x}
spec:
  xgbReplicaSpecs:
    Master: {template: {spec: {containers: [{name: x, image: "ghcr.io/example/xgb:1"}]}}}
---
apiVersion: kubeflow.org/v1
kind: PaddleJob
metadata: {name: p}
spec:
  paddleReplicaSpecs:
    Worker: {template: {spec: {containers: [{name: p, image: "ghcr.io/example/paddle:1"}]}}}
---
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata: {name: j}
spec:
  jaxReplicaSpecs:
    Worker: {template: {spec: {containers: [{name: j, image: "ghcr.io/example/jax:1"}]}}}
---
apiVersion: kubeflow.org/v1
kind: MXJob
metadata: {name: m}
spec:
  mxReplicaSpecs:
    Scheduler: {template: {spec: {containers: [{name: m, image: "ghcr.io/example/mx:1"}]}}}
---
apiVersion: kubeflow.org/v1
kind: Notebook
metadata: {name: nb}
spec:
  template:
    spec:
      containers: [{name: nb, image: "jupyter/minimal-notebook:2024-05-27"}]
`,
			want: []string{
				"spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
				"spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image ghcr.io/example/train:3",
				"spec.tfReplicaSpecs.PS.template.spec.containers[0].image tensorflow/tensorflow:2.18.0",
				"spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].image mpioperator/mpi-pi:openmpi",
				"spec.xgbReplicaSpecs.Master.template.spec.containers[0].image ghcr.io/example/xgb:1",
				"spec.paddleReplicaSpecs.Worker.template.spec.containers[0].image ghcr.io/example/paddle:1",
				"spec.jaxReplicaSpecs.Worker.template.spec.containers[0].image ghcr.io/example/jax:1",
				"spec.mxReplicaSpecs.Scheduler.template.spec.containers[0].image ghcr.io/example/mx:1",
				"spec.template.spec.containers[0].image jupyter/minimal-notebook:2024-05-27",
			},
		},
		{
			name: "Kubeflow Trainer TrainJob and runtimes; JobSet",
			yaml: `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    image: ghcr.io/example/trainer:0.4
    numNodes: 2
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          spec:
            template:
              spec:
                containers: [{name: node, image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"}]
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js}
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        template:
          spec:
            containers: [{name: w, image: "busybox:1.36"}]
`,
			want: []string{
				"spec.trainer.image ghcr.io/example/trainer:0.4",
				"spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
				"spec.replicatedJobs[0].template.spec.template.spec.containers[0].image busybox:1.36",
			},
		},
		{
			name: "Flink FlinkDeployment: image and pod templates",
			yaml: `apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata: {name: wordcount}
spec:
  image: flink:1.20
  flinkVersion: v1_20
  podTemplate:
    apiVersion: v1
    kind: Pod
    spec:
      containers:
      - name: flink-main-container
        volumeMounts: [{name: logs, mountPath: /opt/flink/log}]
      - name: fluentbit
        image: fluent/fluent-bit:3.0
  jobManager:
    resource: {memory: 2048m, cpu: 1}
  taskManager:
    podTemplate:
      spec:
        initContainers: [{name: busybox, image: "busybox:1.36"}]
`,
			want: []string{
				"spec.podTemplate.spec.containers[1].image fluent/fluent-bit:3.0",
				"spec.taskManager.podTemplate.spec.initContainers[0].image busybox:1.36",
				"spec.image flink:1.20",
			},
		},
		{
			name: "Spark SparkApplication and ScheduledSparkApplication",
			yaml: `apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata: {name: pi}
spec:
  type: Scala
  mode: cluster
  image: spark:3.5.3
  imagePullPolicy: IfNotPresent
  mainApplicationFile: local:///opt/spark/examples/jars/spark-examples.jar
  driver:
    cores: 1
    sidecars:
    - name: proxy
      image: envoyproxy/envoy:v1.32.1
    template:
      spec:
        initContainers: [{name: wait, image: "busybox:1.36"}]
  executor:
    instances: 2
    image: ghcr.io/example/spark-executor:3.5.3
    initContainers:
    - name: fetch
      image: alpine:3.20
---
apiVersion: sparkoperator.k8s.io/v1beta2
kind: ScheduledSparkApplication
metadata: {name: nightly}
spec:
  schedule: "@daily"
  template:
    type: Python
    image: spark-py:3.5.3
    driver:
      image: spark-py-driver:3.5.3
`,
			want: []string{
				"spec.driver.template.spec.initContainers[0].image busybox:1.36",
				"spec.driver.sidecars[0].image envoyproxy/envoy:v1.32.1",
				"spec.executor.initContainers[0].image alpine:3.20",
				"spec.image spark:3.5.3",
				"spec.executor.image ghcr.io/example/spark-executor:3.5.3",
				"spec.template.image spark-py:3.5.3",
				"spec.template.driver.image spark-py-driver:3.5.3",
			},
		},
		{
			name: "Volcano, OpenKruise, OpenShift, Prometheus operator, KServe",
			yaml: `apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: vj}
spec:
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        containers: [{name: w, image: "ghcr.io/example/volcano:1"}]
---
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: cs}
spec:
  template:
    spec:
      containers: [{name: c, image: "nginx:1.25"}]
---
apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata: {name: acj}
spec:
  template:
    broadcastJobTemplate:
      spec:
        template:
          spec:
            containers: [{name: b, image: "busybox:1.36"}]
---
apiVersion: apps.openshift.io/v1
kind: DeploymentConfig
metadata: {name: dc}
spec:
  template:
    spec:
      containers: [{name: d, image: "registry.example.com:5000/team/migrate:v7"}]
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {name: main}
spec:
  image: quay.io/prometheus/prometheus:v3.1.0
  containers:
  - name: config-reloader
    image: quay.io/prometheus-operator/prometheus-config-reloader:v0.79.2
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: sklearn}
spec:
  predictor:
    model:
      modelFormat: {name: sklearn}
      image: kserve/sklearnserver:v0.14.1
    containers:
    - name: kserve-container
      image: ghcr.io/example/predictor:1
  transformer:
    containers: [{name: t, image: "ghcr.io/example/transformer:1"}]
---
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: rt}
spec:
  containers: [{name: kserve-container, image: "kserve/sklearnserver:v0.14.1"}]
`,
			want: []string{
				"spec.tasks[0].template.spec.containers[0].image ghcr.io/example/volcano:1",
				"spec.template.spec.containers[0].image nginx:1.25",
				"spec.template.broadcastJobTemplate.spec.template.spec.containers[0].image busybox:1.36",
				"spec.template.spec.containers[0].image registry.example.com:5000/team/migrate:v7",
				"spec.containers[0].image quay.io/prometheus-operator/prometheus-config-reloader:v0.79.2",
				"spec.image quay.io/prometheus/prometheus:v3.1.0",
				"spec.predictor.containers[0].image ghcr.io/example/predictor:1",
				"spec.transformer.containers[0].image ghcr.io/example/transformer:1",
				"spec.predictor.model.image kserve/sklearnserver:v0.14.1",
				"spec.containers[0].image kserve/sklearnserver:v0.14.1",
			},
		},
		{
			name: "kind without apiVersion matches by kind; another group's kind of the same name does not",
			yaml: `kind: RayJob
spec:
  submitterPodTemplate:
    spec:
      containers: [{name: s, image: "rayproject/ray:2.41.0"}]
---
apiVersion: example.com/v1
kind: RayJob
spec:
  submitterPodTemplate:
    spec:
      other: {image: "not-found-by-kind:1"}
`,
			want: []string{"spec.submitterPodTemplate.spec.containers[0].image rayproject/ray:2.41.0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"x.yaml": tc.yaml})
			tree, err := Find(context.Background(), []string{dir})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range tree.Sites() {
				if s.FoundBy != ByKind {
					continue
				}
				got = append(got, s.Path+" "+s.Value)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sites found by kind:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestKnownKindsDocumented: docs/pin.md names every kind known by name.
func TestKnownKindsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "pin.md"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := KnownKinds()
	if len(kinds) < 60 || !slices.Contains(kinds, "agents.x-k8s.io/Sandbox") || !slices.Contains(kinds, "Pod") {
		t.Fatalf("known kinds %q", kinds)
	}
	for _, k := range kinds {
		group, kind, ok := strings.Cut(k, "/")
		if !ok {
			group, kind = "", k
		}
		if !strings.Contains(string(doc), "`"+kind+"`") || group != "" && !strings.Contains(string(doc), "`"+group+"`") {
			t.Errorf("docs/pin.md does not name %s", k)
		}
	}
}
