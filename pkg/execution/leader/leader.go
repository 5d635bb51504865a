package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/slipway-dev/slipway/pkg/kubeaccess"
)

// DefaultLeaseDuration is how long a Lease holds without renewal (client-go's
// default): a killed leader's work moves within it.
const DefaultLeaseDuration = 15 * time.Second

// Config names the Lease and the candidate.
type Config struct {
	// Namespace and Name are the Lease's.
	Namespace, Name string
	// Identity is this candidate's (default: the host's name, '_' and 8
	// random hex digits, so a restarted process is a new candidate).
	Identity string
	// LeaseDuration (default DefaultLeaseDuration); the leader gives up
	// when it could not renew for 2/3 of it, and candidates retry every
	// seventh of it.
	LeaseDuration time.Duration
	// Log receives one line when this candidate starts or stops leading,
	// and when it sees another leader (default: discard).
	Log io.Writer
}

// Permissions are the verbs the election uses on its Lease's namespace.
func Permissions(namespace string) []kubeaccess.Permission {
	var out []kubeaccess.Permission
	for _, v := range []string{"create", "get", "update"} {
		out = append(out, kubeaccess.Permission{Group: "coordination.k8s.io", Resource: "leases", Verb: v, Namespace: namespace})
	}
	return out
}

// Elector campaigns for the Lease and runs work while it holds it.
type Elector struct {
	c       Config
	lock    resourcelock.Interface
	leading atomic.Bool
}

// New is a candidate for the Lease of c through the API server of cfg.
func New(cfg *rest.Config, c Config) (*Elector, error) {
	if c.Namespace == "" || c.Name == "" {
		return nil, errors.New("leader: the Lease needs a namespace and a name")
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.LeaseDuration < time.Second {
		return nil, fmt.Errorf("leader: lease duration %s: at least 1s", c.LeaseDuration)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("leader: identity: %w", err)
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Identity = host + "_" + hex.EncodeToString(b[:])
	}
	client, err := coordclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
	}
	return &Elector{c: c, lock: lock}, nil
}

// Identity is this candidate's name in the Lease's holderIdentity.
func (e *Elector) Identity() string { return e.c.Identity }

// Leading says whether this candidate holds the Lease and its work runs.
func (e *Elector) Leading() bool { return e.leading.Load() }

// Run campaigns until ctx ends. Each time it wins, work runs with a context
// that ends when leadership is lost (the Lease could not be renewed) or ctx
// ends; after a loss it campaigns again once work has returned. When ctx
// ends it waits for work to return, then gives the Lease up, so the next
// candidate takes over at once.
func (e *Elector) Run(ctx context.Context, work func(context.Context)) {
	retry := e.c.LeaseDuration / 7
	for ctx.Err() == nil {
		e.term(ctx, work)
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

// term is one campaign: until this candidate has led and lost, or ctx ends.
func (e *Elector) term(ctx context.Context, work func(context.Context)) {
	// The election runs on its own context, ended only once work has
	// returned: ReleaseOnCancel gives the Lease up when it ends.
	elect, stopElect := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElect()
	started, done := make(chan struct{}), make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            e.lock,
		LeaseDuration:   e.c.LeaseDuration,
		RenewDeadline:   e.c.LeaseDuration * 2 / 3,
		RetryPeriod:     e.c.LeaseDuration / 7,
		ReleaseOnCancel: true,
		Name:            e.c.Namespace + "/" + e.c.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				defer close(done)
				close(started)
				wctx, cancel := context.WithCancel(lctx)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				e.leading.Store(true)
				fmt.Fprintf(e.c.Log, "leader: %s leads (Lease %s/%s)\n", e.c.Identity, e.c.Namespace, e.c.Name)
				work(wctx)
				e.leading.Store(false)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != e.c.Identity {
					fmt.Fprintf(e.c.Log, "leader: %s leads (Lease %s/%s); %s waits\n", id, e.c.Namespace, e.c.Name, e.c.Identity)
				}
			},
		},
	})
	if err != nil { // the configuration is New's: cannot happen
		fmt.Fprintf(e.c.Log, "leader: %v\n", err)
		<-ctx.Done()
		return
	}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		le.Run(elect)
	}()
	select {
	case <-ran: // lost the Lease (or never won it: elect ended)
	case <-ctx.Done():
		select {
		case <-started:
			<-done // its work first, then the Lease goes
		default:
		}
		stopElect()
		<-ran
	}
	select {
	case <-started:
		<-done
		fmt.Fprintf(e.c.Log, "leader: %s no longer leads (Lease %s/%s)\n", e.c.Identity, e.c.Namespace, e.c.Name)
	default:
	}
}
