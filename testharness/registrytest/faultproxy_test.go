package registrytest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// get does GET url+"/v2/" with client and returns the status and Retry-After,
// or the error.
func get(ctx context.Context, client *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v2/", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, "", err
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

// newProxy starts a registry and a fault proxy in front of it.
func newProxy(t *testing.T) *FaultProxy {
	t.Helper()
	return StartFaultProxy(t, NewDistribution(t).URL())
}

func TestLatency(t *testing.T) {
	proxy := newProxy(t)
	const latency = 150 * time.Millisecond
	proxy.SetLatency(latency)
	start := time.Now()
	code, _, err := get(t.Context(), http.DefaultClient, proxy.URL())
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /v2/ = %d, %v; want 200", code, err)
	}
	if elapsed := time.Since(start); elapsed < latency {
		t.Errorf("GET took %v, want at least the latency %v", elapsed, latency)
	}

	// A client that gives up during the delay is not forwarded.
	proxy.SetLatency(time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := get(ctx, http.DefaultClient, proxy.URL()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GET with a 50ms deadline under a minute of latency: %v, want deadline exceeded", err)
	}
}

func TestStatusFaults(t *testing.T) {
	date := time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)
	tests := []struct {
		name       string
		fault      Fault
		code       int
		retryAfter string
	}{
		{"429 seconds", TooManyRequests("2"), http.StatusTooManyRequests, "2"},
		{"429 date", TooManyRequests(date), http.StatusTooManyRequests, date},
		{"429 bare", TooManyRequests(""), http.StatusTooManyRequests, ""},
		{"503", Status(http.StatusServiceUnavailable), http.StatusServiceUnavailable, ""},
		{"500", Status(http.StatusInternalServerError), http.StatusInternalServerError, ""},
	}
	proxy := newProxy(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy.ResetStats()
			proxy.Inject(Rule{Method: http.MethodGet, PathContains: "/v2/", Times: 1, Fault: tt.fault})
			code, retryAfter, err := get(t.Context(), http.DefaultClient, proxy.URL())
			if err != nil || code != tt.code || retryAfter != tt.retryAfter {
				t.Fatalf("first GET = %d, Retry-After %q, %v; want %d, %q", code, retryAfter, err, tt.code, tt.retryAfter)
			}
			if code, _, err := get(t.Context(), http.DefaultClient, proxy.URL()); err != nil || code != http.StatusOK {
				t.Fatalf("second GET = %d, %v; want 200 once the rule is used up", code, err)
			}
			if r, f := proxy.Requests(), proxy.Faults(); r != 2 || f != 1 {
				t.Errorf("Requests(), Faults() = %d, %d; want 2, 1", r, f)
			}
			log := proxy.Log()
			if len(log) != 2 || log[0].Status != tt.code || log[1].Status != http.StatusOK || log[0].Path != "/v2/" {
				t.Errorf("Log() = %+v, want %d then 200 for /v2/", log, tt.code)
			}
		})
	}
}

func TestStatusFaultBody(t *testing.T) {
	proxy := newProxy(t)
	proxy.Inject(Rule{Fault: Status(http.StatusServiceUnavailable)})
	resp, err := http.Get(proxy.URL() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || !strings.Contains(string(body), `"code":"UNAVAILABLE"`) {
		t.Errorf("503 body = %s (%s), want a registry errors body", body, ct)
	}
}

func TestReset(t *testing.T) {
	proxy := newProxy(t)
	proxy.Inject(Rule{Method: http.MethodGet, Times: 1, Fault: Reset()})
	// A fresh connection per request: Go retries idempotent requests that fail
	// on a reused one, which would hide the reset.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	_, _, err := get(t.Context(), client, proxy.URL())
	if err == nil {
		t.Fatal("GET through a reset succeeded, want an error")
	}
	t.Logf("reset error: %v (errors.Is ECONNRESET: %v)", err, errors.Is(err, syscall.ECONNRESET))
	if !errors.Is(err, syscall.ECONNRESET) && !strings.Contains(err.Error(), "reset") {
		t.Errorf("GET through a reset: %v, want connection reset", err)
	}
	if code, _, err := get(t.Context(), client, proxy.URL()); err != nil || code != http.StatusOK {
		t.Errorf("GET after the reset = %d, %v; want 200", code, err)
	}
	if log := proxy.Log(); len(log) != 2 || log[0].Status != 0 || proxy.Faults() != 1 {
		t.Errorf("Log() = %+v, Faults() = %d; want status 0 then 200, one fault", log, proxy.Faults())
	}
}

func TestHang(t *testing.T) {
	proxy := newProxy(t)
	proxy.Inject(Rule{Times: 1, Fault: Hang(50 * time.Millisecond)})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	if _, _, err := get(t.Context(), client, proxy.URL()); err == nil {
		t.Error("GET through a hang succeeded, want a reset")
	}
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Errorf("hang ended after %v, want at least 50ms", elapsed)
	}

	// A client that gives up ends the hang.
	proxy.Inject(Rule{Times: 1, Fault: Hang(time.Hour)})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := get(ctx, client, proxy.URL()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GET with a deadline through an hour's hang: %v, want deadline exceeded", err)
	}
	for len(proxy.Log()) < 2 {
		time.Sleep(10 * time.Millisecond) // the test's timeout bounds this
	}
	if f := proxy.Faults(); f != 2 {
		t.Errorf("Faults() = %d, want 2", f)
	}
}

func TestRuleOrder(t *testing.T) {
	proxy := newProxy(t)
	proxy.Inject(Rule{Method: http.MethodPut, Fault: Status(http.StatusBadGateway)}) // never a GET
	proxy.Inject(Rule{PathContains: "/v2/", Times: 1})                               // waves one through
	proxy.Inject(Rule{PathContains: "/v2/", Times: 2, Fault: Status(http.StatusInternalServerError)})
	proxy.Inject(Rule{PathContains: "/nowhere/", Fault: Status(http.StatusTeapot)})
	var got []int
	for range 4 {
		code, _, err := get(t.Context(), http.DefaultClient, proxy.URL())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, code)
	}
	want := []int{200, 500, 500, 200}
	if !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	if f := proxy.Faults(); f != 2 {
		t.Errorf("Faults() = %d, want 2 (a zero Fault is no fault)", f)
	}

	proxy.Inject(Rule{Fault: Status(http.StatusServiceUnavailable)})
	if code, _, _ := get(t.Context(), http.DefaultClient, proxy.URL()); code != http.StatusServiceUnavailable {
		t.Errorf("with a Times 0 rule: %d, want 503", code)
	}
	proxy.ClearFaults()
	if code, _, _ := get(t.Context(), http.DefaultClient, proxy.URL()); code != http.StatusOK {
		t.Errorf("after ClearFaults: %d, want 200", code)
	}
}

func TestPeakInFlight(t *testing.T) {
	proxy := newProxy(t)
	proxy.SetLatency(200 * time.Millisecond)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if code, _, err := get(t.Context(), http.DefaultClient, proxy.URL()); err != nil || code != http.StatusOK {
				errs <- errors.Join(err, errors.New(http.StatusText(code)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := proxy.Requests(); got != n {
		t.Errorf("Requests() = %d, want %d", got, n)
	}
	if got := proxy.PeakInFlight(); got < 2 || got > n {
		t.Errorf("PeakInFlight() = %d, want between 2 and %d", got, n)
	}
	t.Logf("peak in flight: %d of %d", proxy.PeakInFlight(), n)

	proxy.ResetStats()
	if r, f, p, l := proxy.Requests(), proxy.Faults(), proxy.PeakInFlight(), len(proxy.Log()); r+f+p+l != 0 {
		t.Errorf("after ResetStats: requests %d, faults %d, peak %d, log %d; want all 0", r, f, p, l)
	}
}

func TestFaultProxyClose(t *testing.T) {
	proxy, err := NewFaultProxy(NewDistribution(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy.Inject(Rule{Fault: Hang(time.Hour)})
	done := make(chan error, 1)
	go func() {
		_, _, err := get(context.Background(), http.DefaultClient, proxy.URL())
		done <- err
	}()
	for proxy.Requests() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	proxy.Close() // ends the hour's hang
	proxy.Close()
	if err := <-done; err == nil {
		t.Error("hanging GET succeeded after Close, want an error")
	}
	if _, _, err := get(t.Context(), http.DefaultClient, proxy.URL()); err == nil {
		t.Error("GET after Close succeeded, want a connection error")
	}
}

func TestNewFaultProxyRejectsBadTarget(t *testing.T) {
	for _, target := range []string{"", "127.0.0.1:5000", "ftp://127.0.0.1", "http://"} {
		if p, err := NewFaultProxy(target); err == nil {
			p.Close()
			t.Errorf("NewFaultProxy(%q) succeeded, want an error", target)
		}
	}
}
