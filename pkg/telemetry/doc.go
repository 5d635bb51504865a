// Package telemetry is what Slipway's processes say about themselves:
// metrics through the OpenTelemetry metrics SDK, exported in Prometheus
// text by the OTel Prometheus exporter on a private registry (Metrics,
// served at GET /metrics of the runtime and the control plane), and
// traces through the OTel trace SDK (Tracing), kept in a bounded
// in-memory ring per process (Ring, what `slipway job trace` reads) and
// sent over OTLP/HTTP when the process is told to.
//
// The metric set is seed 000's: sandbox_create_latency (warm hits and cold
// starts as separate series of one histogram, by the start label),
// kit_setup_latency, task_execution_duration, task_failure_count,
// artifact_export_bytes, cleanup_latency, orphan_resource_count,
// known_compute_cost and unknown_cost_run_count, with the warm-hit
// fraction, unused warm-minutes and warm shortage time, and
// cleanup_unknown_count (the cleanup reconciler's alert: actions whose
// outcome is unknown); policy_denial_count belongs to the egress policy's
// code. A canary registers its own instruments on a Metrics
// (NewCanaryMetrics: rounds by result, failures and step durations by
// step, the last success's time). Labels are bounded: only the names
// in LabelNames, and values that the recording methods bound themselves
// (a failure reason outside FailureReasons is "other"); CheckExposition
// fails on a scrape that carries a run, job or sandbox id, a URL, a token
// or free text.
//
// A job's trace has an id derived from the job's id (JobTraceID), so every
// replica and every recovery of the job adds to the same trace, and its
// root span (the job, from submission to its end) is written last with a
// span id derived the same way.
//
// What it is not: where the events happen (the runtime and the control
// plane call the recording methods), nor a log library (log/slog JSON is
// used directly, with the same ids as the spans' attributes).
package telemetry
