package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// admitTick is how often admission looks without being woken.
const admitTick = 100 * time.Millisecond

func (e *Engine) admitLoop(ctx context.Context) {
	t := time.NewTicker(admitTick)
	defer t.Stop()
	for {
		if _, err := e.AdmitOnce(ctx); err != nil && ctx.Err() == nil {
			e.c.Logger.Warn("admission", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.wakeCh:
		}
	}
}

// AdmitOnce admits what fits and hands the admitted jobs to River; Start
// runs it in a loop (tests with ManualAdmission call it themselves).
func (e *Engine) AdmitOnce(ctx context.Context) (int, error) {
	cfg, err := e.c.Config.Current(ctx)
	if err != nil {
		return 0, err
	}
	limits := tenantLimits(cfg)
	// Look first without the write lock (most wake-ups find no room).
	if ok, err := e.st.Admissible(ctx, e.c.MaxActive, limits); err != nil || !ok {
		return 0, err
	}
	admitted, err := e.st.Admit(ctx, slots{Max: e.c.MaxActive, Reserve: e.c.Reserve}, limits, func(j *controlapi.Job, l *lease) { e.decide(cfg, j, l) })
	if err != nil {
		return len(admitted), err
	}
	return len(admitted), e.dispatchAdmitted(ctx, cfg, admitted)
}

// tenantLimits is what admission needs of the tenants' configuration.
func tenantLimits(cfg *tenancy.Config) map[string]store.TenantLimit {
	limits := make(map[string]store.TenantLimit, len(cfg.Tenants))
	for name, t := range cfg.Tenants {
		limits[name] = store.TenantLimit{Concurrency: max(1, t.Value.Concurrency)}
	}
	return limits
}

// dispatchAdmitted records the admission wait of jobs just admitted (every
// path of admission ends here, after its transaction committed) and hands
// them to River. It is not in the
// admission transaction (River's SQLite file is not the store's): a lost
// insert is redispatched by the recoverer once the job's dispatch is
// overdue.
func (e *Engine) dispatchAdmitted(ctx context.Context, cfg *tenancy.Config, admitted []*controlapi.Job) error {
	if len(admitted) == 0 {
		return nil
	}
	for _, j := range admitted {
		if j.State == controlapi.Admitted && j.AdmittedAt != nil {
			e.c.Metrics.JobAdmitted(ctx, tierOf(cfg, j.Tenant), j.AdmittedAt.Sub(j.CreatedAt))
		}
	}
	if e.c.NoDispatch {
		if e.c.NullDispatch != nil {
			for _, j := range admitted {
				go e.c.NullDispatch(j.ID)
			}
		}
		return nil
	}
	ids := make([]string, len(admitted))
	for i, j := range admitted {
		ids[i] = j.ID
	}
	if err := e.q.insertMany(ctx, ids); err != nil {
		return fmt.Errorf("queue %d admitted jobs: %w", len(ids), err)
	}
	return nil
}

// dispatchGrace is how long an admitted job may wait for a worker before
// the recoverer hands it to River again.
const dispatchGrace = 30 * time.Second

// decide admits a queued job under today's configuration, or refuses it
// when the tenant may no longer run it; a profile changed since submission
// never changes the job silently: the job keeps the profile it resolved,
// and says so.
func (e *Engine) decide(cfg *tenancy.Config, j *controlapi.Job, l *lease) {
	now := time.Now().UTC()
	if _, ok := cfg.Tenants[j.Tenant]; !ok {
		j.State, j.Reason, j.EndedAt = controlapi.Refused, "forbidden", tp(now)
		j.Detail = fmt.Sprintf("tenant %s is no longer declared in the config repository at %s", j.Tenant, short(cfg.Revision))
		return
	}
	if err := cfg.Authorize(j.Tenant, j.Profile.Name, j.Pool); err != nil {
		j.State, j.Reason, j.EndedAt = controlapi.Refused, "forbidden", tp(now)
		j.Detail = fmt.Sprintf("at config revision %s: %v", short(cfg.Revision), err)
		return
	}
	switch cur, ok := cfg.Profiles[j.Profile.Name]; {
	case !ok:
		j.Notes = append(j.Notes, controlapi.Note{At: now, Text: fmt.Sprintf("profile %s was deleted at %s after submission; the job runs with it as at %s (digest %s)",
			j.Profile.Name, short(cfg.Revision), short(j.Profile.Revision), j.Profile.Digest)})
	case cur.Digest != j.Profile.Digest:
		j.Notes = append(j.Notes, controlapi.Note{At: now, Text: fmt.Sprintf("profile %s changed at %s (digest %s) after submission; the job runs with it as at %s (digest %s)",
			j.Profile.Name, short(cur.Revision), cur.Digest, short(j.Profile.Revision), j.Profile.Digest)})
	}
	j.State, j.Reason, j.Detail = controlapi.Admitted, "admitted", ""
	j.AdmittedAt, j.DeadlineAt = tp(now), tp(now.Add(time.Duration(j.Limits.Deadline)))
	l.DispatchDue = now.Add(dispatchGrace)
}
