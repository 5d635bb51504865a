package leader_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/execution/leader"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// events records what the candidates' work did, in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// Two candidates for one Lease on a real API server: one works, the other
// waits; when the leader's context ends, its work returns before the Lease
// is given up, and the other takes over at once (well within the lease
// duration) and holds the Lease.
func TestOneLeaderAndAHandover(t *testing.T) {
	c := kubetest.New(t)
	const lease = 10 * time.Second
	var ev events
	work := func(name string) func(context.Context) {
		return func(ctx context.Context) {
			ev.add(name + " starts")
			<-ctx.Done()
			time.Sleep(300 * time.Millisecond) // work that takes a moment to stop
			ev.add(name + " stops")
		}
	}
	a, err := leader.New(c.Config(), leader.Config{Namespace: "default", Name: "work", Identity: "a", LeaseDuration: lease})
	if err != nil {
		t.Fatal(err)
	}
	b, err := leader.New(c.Config(), leader.Config{Namespace: "default", Name: "work", Identity: "b", LeaseDuration: lease})
	if err != nil {
		t.Fatal(err)
	}
	actx, stopA := context.WithCancel(context.Background())
	aDone := make(chan struct{})
	go func() { defer close(aDone); a.Run(actx, work("a")) }()
	waitFor(t, 60*time.Second, "a leads", a.Leading)
	bctx, stopB := context.WithCancel(context.Background())
	bDone := make(chan struct{})
	go func() { defer close(bDone); b.Run(bctx, work("b")) }()
	time.Sleep(2 * time.Second) // b's campaign tries several times meanwhile
	if b.Leading() {
		t.Fatal("b leads while a holds the Lease")
	}
	stopped := time.Now()
	stopA()
	<-aDone
	waitFor(t, lease, "b leads after a gave the Lease up", b.Leading)
	t.Logf("b led %v after a's context ended", time.Since(stopped).Round(time.Millisecond))
	if got := ev.list(); len(got) < 3 || got[0] != "a starts" || got[1] != "a stops" || got[2] != "b starts" {
		t.Errorf("events %v: want a's work to stop before b's starts", got)
	}
	k, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	l, err := k.CoordinationV1().Leases("default").Get(context.Background(), "work", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h == nil || *h != "b" {
		t.Errorf("Lease holder %v, want b", h)
	}
	stopB()
	<-bDone
	if a.Leading() || b.Leading() {
		t.Error("a candidate still says it leads after its Run returned")
	}
}

// A lease duration under a second is refused, and so is a Lease without a
// name.
func TestConfigRefused(t *testing.T) {
	for _, cfg := range []leader.Config{{Namespace: "default", Name: "x", LeaseDuration: 500 * time.Millisecond}, {Namespace: "default"}} {
		if _, err := leader.New(&rest.Config{Host: "https://127.0.0.1:1"}, cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
