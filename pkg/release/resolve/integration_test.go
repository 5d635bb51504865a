package resolve_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// Debian's docker-registry behind a fault-injecting proxy on 127.0.0.1: the
// retry and concurrency behaviour proved against a real registry, over a real
// network path.
func distributionBehindProxy(t *testing.T) (*registrytest.Distribution, *registrytest.FaultProxy, string) {
	t.Helper()
	d := registrytest.NewDistribution(t)
	p := registrytest.StartFaultProxy(t, d.URL())
	return d, p, strings.TrimPrefix(p.URL(), "http://")
}

func pushTo(t *testing.T, host, repoTag string) string {
	t.Helper()
	s := &server{host: host}
	return s.push(t, repoTag, randomImage(t))
}

func TestDistributionConcurrencyLimitHolds(t *testing.T) {
	_, p, host := distributionBehindProxy(t)
	var refs []ref.Reference
	want := map[string]string{}
	for i := range 30 {
		rt := fmt.Sprintf("app%d:v1", i%5)
		if i >= 5 {
			rt = fmt.Sprintf("app%d:v%d", i%5, i)
		}
		want[rt] = pushTo(t, host, rt)
		refs = append(refs, parse(t, host+"/"+rt))
	}
	p.SetLatency(20 * time.Millisecond)
	p.ResetStats()
	r := resolve.Stack(newRegistry(t), 4)
	var wg sync.WaitGroup
	for _, rf := range refs {
		wg.Go(func() {
			pin, err := r.Resolve(context.Background(), rf)
			if err != nil {
				t.Error(err)
				return
			}
			if pin.Digest != want[strings.TrimPrefix(rf.String(), host+"/")] {
				t.Errorf("%s pinned to %s", rf, pin.Digest)
			}
		})
	}
	wg.Wait()
	if peak := p.PeakInFlight(); peak > 4 {
		t.Fatalf("peak %d requests in flight through the proxy, limit 4", peak)
	}
}

func TestDistributionSurvivesFaults(t *testing.T) {
	_, p, host := distributionBehindProxy(t)
	want := pushTo(t, host, "app:v1")
	for _, f := range []registrytest.Fault{
		registrytest.TooManyRequests("1"),
		registrytest.Status(http.StatusInternalServerError),
		registrytest.Status(http.StatusServiceUnavailable),
		registrytest.Reset(),
	} {
		t.Run(f.String(), func(t *testing.T) {
			p.ClearFaults()
			p.ResetStats()
			p.Inject(registrytest.Rule{PathContains: "/manifests/", Times: 2, Fault: f})
			start := time.Now()
			pin, err := newRegistry(t, fastRetry(4)).Resolve(context.Background(), parse(t, host+"/app:v1"))
			if err != nil || pin.Digest != want {
				t.Fatalf("got %v %v", pin.Digest, err)
			}
			if p.Faults() != 2 {
				t.Fatalf("%d faults served, want 2", p.Faults())
			}
			if strings.Contains(f.String(), "429") && time.Since(start) < 2*time.Second {
				t.Fatalf("two 429s with Retry-After: 1 passed in %v", time.Since(start))
			}
		})
	}
}

func TestDistributionGivesUpWithinBound(t *testing.T) {
	_, p, host := distributionBehindProxy(t)
	pushTo(t, host, "app:v1")
	p.ResetStats()
	p.Inject(registrytest.Rule{PathContains: "/manifests/", Fault: registrytest.Status(http.StatusServiceUnavailable)})
	_, err := newRegistry(t, fastRetry(3)).Resolve(context.Background(), parse(t, host+"/app:v1"))
	if !errors.Is(err, resolve.ErrUnavailable) || !strings.Contains(err.Error(), host+"/app:v1") {
		t.Fatalf("err = %v", err)
	}
	manifestRequests := 0
	for _, r := range p.Log() {
		if strings.Contains(r.Path, "/manifests/") {
			manifestRequests++
		}
	}
	if manifestRequests != 3 {
		t.Fatalf("%d manifest requests, want exactly 3", manifestRequests)
	}
}

func TestDistributionUnknownTag(t *testing.T) {
	_, _, host := distributionBehindProxy(t)
	pushTo(t, host, "app:v1")
	_, err := newRegistry(t).Resolve(context.Background(), parse(t, host+"/app:nope"))
	if !errors.Is(err, resolve.ErrNotFound) || !strings.Contains(err.Error(), "app:nope") || !strings.Contains(err.Error(), "manifest unknown") {
		t.Fatalf("err = %v", err)
	}
}
