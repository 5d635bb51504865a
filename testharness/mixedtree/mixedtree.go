package mixedtree

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Docs are the documents of the generated tree: %[1]s is a name, %[2]s
// random noise, %[3]s … %[5]s images. The first BuiltinDocs are built-in
// kinds and objects without images.
const BuiltinDocs = 4

// Docs is every kind of document the tree holds.
var Docs = []string{
	// Built-in workloads and objects without images.
	`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  replicas: 2
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: main
        image: %[3]s
        ports: [{containerPort: 8080}]
      - name: proxy
        image: %[4]s
`,
	`apiVersion: batch/v1
kind: CronJob
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          initContainers:
          - name: prepare
            image: %[4]s
          containers:
          - name: job
            image: %[3]s
`,
	`apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  selector: {app: %[1]s}
  ports:
  - port: 80
    targetPort: 8080
`,
	`apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s
data:
  noise: %[2]s
  settings.yaml: |
    level: info
    endpoint: http://%[1]s:8080
`,
	// agent-sandbox.
	`apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  podTemplate:
    spec:
      containers:
      - name: workspace
        image: %[3]s
`,
	`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  podTemplate:
    spec:
      initContainers:
      - name: clone
        image: %[4]s
      containers:
      - name: agent
        image: %[3]s
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata:
  name: %[1]s
spec:
  replicas: 3
  sandboxTemplateRef:
    name: %[1]s
`,
	// Argo Rollouts and Workflows.
	`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  strategy:
    canary:
      steps: [{setWeight: 20}, {pause: {duration: 60}}]
  template:
    spec:
      containers:
      - name: app
        image: %[3]s
---
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: %[1]s
spec:
  metrics:
  - name: smoke
    provider:
      job:
        spec:
          template:
            spec:
              restartPolicy: Never
              containers:
              - name: check
                image: %[4]s
`,
	`apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: %[1]s-
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  entrypoint: main
  templates:
  - name: main
    container:
      image: %[3]s
      command: [make, test]
  - name: report
    script:
      image: %[4]s
      source: |
        echo done
    sidecars:
    - name: cache
      image: %[5]s
`,
	// Tekton.
	`apiVersion: tekton.dev/v1
kind: Task
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  stepTemplate:
    image: %[5]s
  steps:
  - name: build
    image: %[3]s
    script: make
  sidecars:
  - name: docker
    image: %[4]s
`,
	`apiVersion: tekton.dev/v1
kind: PipelineRun
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  pipelineSpec:
    tasks:
    - name: test
      taskSpec:
        steps:
        - name: unit
          image: %[3]s
    finally:
    - name: notify
      taskSpec:
        steps:
        - name: send
          image: %[4]s
`,
	// Knative, KEDA, Ray.
	`apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  template:
    spec:
      containers:
      - image: %[3]s
---
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata:
  name: %[1]s
spec:
  jobTargetRef:
    template:
      spec:
        containers:
        - name: consumer
          image: %[4]s
`,
	`apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  entrypoint: python train.py
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: head
            image: %[3]s
    workerGroupSpecs:
    - groupName: gpu
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: %[4]s
`,
	// Kubeflow, Flink, Spark.
	`apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: %[3]s
    Worker:
      replicas: 4
      template:
        spec:
          containers:
          - name: pytorch
            image: %[3]s
`,
	`apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  image: %[3]s
  flinkVersion: v1_19
  jobManager:
    resource: {memory: 2048m, cpu: 1}
  taskManager:
    resource: {memory: 2048m, cpu: 1}
---
apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata:
  name: %[1]s
spec:
  type: Scala
  mode: cluster
  image: %[4]s
  mainApplicationFile: local:///opt/app.jar
  driver:
    cores: 1
  executor:
    instances: 2
    image: %[5]s
`,
	// Custom resources no rule names: a pod spec shape, an image field.
	`apiVersion: example.com/v1
kind: Runner
metadata:
  name: %[1]s
  annotations:
    bench.slipway.dev/noise: %[2]s
spec:
  pool:
    containers:
    - name: runner
      image: %[3]s
  cache:
    image: %[4]s
`,
}

// Write writes files YAML files under dir, 100 to a directory, from seed:
// each holds one to three of docs with random names, noise and images (one
// in five already pinned), and each directory a kustomization listing its
// files. The same arguments write the same bytes.
func Write(dir string, files int, seed uint64, docs []string) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	noise := func(n int) string {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rng.UintN(36)]
		}
		return string(buf)
	}
	image := func() string {
		img := fmt.Sprintf("registry.example.com/team-%d/svc-%03d:v1.%d", rng.UintN(8), rng.UintN(200), rng.UintN(5))
		if rng.UintN(5) == 0 {
			img += fmt.Sprintf("@sha256:%064x", rng.Uint64())
		}
		return img
	}
	var names []string
	for i := range files {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
			names = names[:0]
		}
		var sb strings.Builder
		for d := range 1 + rng.UintN(3) {
			if d > 0 {
				sb.WriteString("---\n")
			}
			name := fmt.Sprintf("app-%05d-%d", i, d)
			fmt.Fprintf(&sb, docs[rng.UintN(uint(len(docs)))], name, noise(280+int(rng.UintN(80))), image(), image(), image())
		}
		base := fmt.Sprintf("f%05d.yaml", i)
		names = append(names, base)
		if err := os.WriteFile(filepath.Join(sub, base), []byte(sb.String()), 0o644); err != nil {
			return err
		}
		if i%100 == 99 || i == files-1 {
			k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + strings.Join(names, "\n- ") + "\n"
			if err := os.WriteFile(filepath.Join(sub, "kustomization.yaml"), []byte(k), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
