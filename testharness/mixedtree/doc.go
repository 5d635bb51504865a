// Package mixedtree writes the generated tree of YAML files of mixed kinds
// that pin's and lint's benchmarks read: built-in workloads, kustomizations,
// objects without images and the custom resources of agent-sandbox, Argo,
// Tekton, Knative, KEDA, Ray, Kubeflow, Flink and Spark, from a fixed seed,
// about half its bytes random. It is for benchmarks only; it uses nothing
// but the standard library, so that the benchmark's peer, the code of an
// older commit, reads the same tree.
package mixedtree
