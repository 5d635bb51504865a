package telemetry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultRingSize is how many spans a process keeps in memory.
const DefaultRingSize = 8192

// Tracing is a process's tracer provider: every span goes to its Ring,
// and over OTLP/HTTP when WithOTLP was given.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	ring   *Ring
	tracer trace.Tracer
}

type traceOptions struct {
	ringSize int
	otlp     bool
	service  string
}

// TraceOption configures NewTracing.
type TraceOption func(*traceOptions) error

// WithRingSize keeps the last n spans in memory (default DefaultRingSize).
func WithRingSize(n int) TraceOption {
	return func(o *traceOptions) error {
		if n <= 0 {
			return fmt.Errorf("telemetry: ring size %d: want at least 1", n)
		}
		o.ringSize = n
		return nil
	}
}

// WithOTLP sends spans over OTLP/HTTP too; the exporter reads its endpoint
// and headers from the standard OTEL_EXPORTER_OTLP_* environment.
func WithOTLP() TraceOption {
	return func(o *traceOptions) error { o.otlp = true; return nil }
}

// WithServiceName names the process in its spans' resource (default
// "slipway").
func WithServiceName(name string) TraceOption {
	return func(o *traceOptions) error { o.service = name; return nil }
}

// NewTracing makes a tracer provider writing to a ring, and to OTLP when
// asked.
func NewTracing(ctx context.Context, opts ...TraceOption) (*Tracing, error) {
	o := traceOptions{ringSize: DefaultRingSize, service: "slipway"}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	t := &Tracing{ring: NewRing(o.ringSize)}
	res := resource.NewSchemaless(attribute.String("service.name", o.service))
	popts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithIDGenerator(idGen{}), sdktrace.WithSpanProcessor(t.ring)}
	if o.otlp {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
		}
		popts = append(popts, sdktrace.WithBatcher(exp))
	}
	t.tp = sdktrace.NewTracerProvider(popts...)
	t.tracer = t.tp.Tracer("github.com/slipway-dev/slipway")
	return t, nil
}

// Tracer starts spans.
func (t *Tracing) Tracer() trace.Tracer { return t.tracer }

// Ring is the spans kept in memory.
func (t *Tracing) Ring() *Ring { return t.ring }

// Shutdown flushes and stops the provider (and its OTLP exporter).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// JobTraceID is the trace id of job id's trace: the first 16 bytes of the
// SHA-256 of the id, so every replica and every recovery of the job adds
// to one trace.
func JobTraceID(jobID string) trace.TraceID {
	h := sha256.Sum256([]byte("slipway-job-trace\x00" + jobID))
	var id trace.TraceID
	copy(id[:], h[:16])
	return id
}

func jobRootSpanID(jobID string) trace.SpanID {
	h := sha256.Sum256([]byte("slipway-job-trace\x00" + jobID))
	var id trace.SpanID
	copy(id[:], h[16:24])
	return id
}

// InJob returns ctx whose new spans are children of job id's root span
// (which StartJobRoot writes, usually last, when the job ends).
func InJob(ctx context.Context, jobID string) context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: JobTraceID(jobID), SpanID: jobRootSpanID(jobID), TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

type rootKey struct{}

// StartJobRoot starts job id's root span, with the ids InJob's children
// name as their parent; pass trace.WithTimestamp for a start in the past.
func (t *Tracing) StartJobRoot(ctx context.Context, jobID, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{}) // no parent
	ctx = context.WithValue(ctx, rootKey{}, jobID)
	return t.tracer.Start(ctx, name, opts...)
}

// idGen gives a job's root span its derived ids, and every other span
// random ones.
type idGen struct{}

var _ sdktrace.IDGenerator = idGen{}

func (idGen) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if id, ok := ctx.Value(rootKey{}).(string); ok {
		return JobTraceID(id), jobRootSpanID(id)
	}
	var tid trace.TraceID
	_, _ = rand.Read(tid[:])
	return tid, randSpanID()
}

func (idGen) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if sid, ok := ctx.Value(spanIDKey{}).(trace.SpanID); ok && sid.IsValid() {
		return sid
	}
	return randSpanID()
}

func randSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		_, _ = rand.Read(sid[:])
	}
	return sid
}
