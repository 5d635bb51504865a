package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/kubeaccess"
)

// accessRecheck is how often a runtime missing a verb asks again (a Role
// fixed while it runs makes it ready without a restart).
const accessRecheck = 10 * time.Second

// accessCheck is the Kubernetes backend's check of the verbs it uses
// (kubesandbox.Permissions, leader.Permissions): made at start, logged
// once per distinct answer, and a part of GET /readyz until every verb is
// granted.
type accessCheck struct {
	cfg   *rest.Config
	perms []kubeaccess.Permission
	log   io.Writer

	mu       sync.Mutex
	reason   string // "" once all are granted
	checked  time.Time
	checking bool // a check started by ready is under way
	told     string
}

func newAccessCheck(cfg *rest.Config, perms []kubeaccess.Permission, log io.Writer) *accessCheck {
	return &accessCheck{cfg: cfg, perms: perms, log: log, reason: "its permissions were not reviewed yet"}
}

// check asks the API server and records the answer.
func (a *accessCheck) check(ctx context.Context) {
	err := kubeaccess.Check(ctx, a.cfg, a.perms)
	var m *kubeaccess.Missing
	reason, line := "", ""
	switch {
	case errors.As(err, &m):
		s := make([]string, len(m.Permissions))
		for i, p := range m.Permissions {
			s[i] = p.String()
		}
		reason = "its service account may not " + strings.Join(s, "; may not ") + " (the Role the runtime needs lacks these verbs)"
		line = "runtime: not ready: " + reason
	case err != nil:
		reason = "its permissions could not be reviewed: the cluster's API server did not answer (the runtime's log has the detail)"
		line = fmt.Sprintf("runtime: not ready: reviewing its permissions: %v", err)
	default:
		line = fmt.Sprintf("runtime: every verb it uses is granted (%d reviewed)", len(a.perms))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reason, a.checked = reason, time.Now()
	if line != a.told {
		a.told = line
		fmt.Fprintln(a.log, line)
	}
}

// accessTimeout bounds a check that ready starts.
const accessTimeout = 30 * time.Second

// ready is the readiness part: "" once every verb was granted; until then
// the last reason, while a new check starts in the background at most
// every accessRecheck (a probe never waits for a few dozen reviews).
func (a *accessCheck) ready(context.Context) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reason != "" && !a.checking && time.Since(a.checked) >= accessRecheck {
		a.checking = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), accessTimeout)
			defer cancel()
			a.check(ctx)
			a.mu.Lock()
			a.checking = false
			a.mu.Unlock()
		}()
	}
	return a.reason
}

// readyCheck is a as a part of GET /readyz.
func (a *accessCheck) readyCheck() runtime.ReadyCheck {
	return runtime.ReadyCheck{Part: "permissions", Check: a.ready}
}
