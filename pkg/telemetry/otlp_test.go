package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// With WithOTLP, spans reach an OTLP/HTTP receiver (an in-process server
// that decodes the export request) as well as the ring.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	var names []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad request", 400)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	ctx := context.Background()
	tr, err := telemetry.NewTracing(ctx, telemetry.WithOTLP())
	if err != nil {
		t.Fatal(err)
	}
	_, s := tr.Tracer().Start(telemetry.InJob(ctx, "j-1"), "claim")
	s.End()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(names) != 1 || names[0] != "claim" {
		t.Errorf("the receiver got spans %v, want [claim]", names)
	}
	if n := len(tr.Ring().Trace(telemetry.JobTraceID("j-1"))); n != 1 {
		t.Errorf("the ring holds %d spans, want 1", n)
	}
}
