package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// WithConfigWriter lets operators act on rollouts (abort; rollback with
// WithEvidenceSigner or WithUnsignedEvidence): open opens the config
// repository afresh for each writer (a gitops.Repo is for one goroutine at
// a time), author signs the commits. Without it the console only reads.
func WithConfigWriter(open func(ctx context.Context) (*gitops.Repo, error), author gitops.Signature) Option {
	return func(o *options) error {
		if open == nil {
			return errors.New("console: WithConfigWriter(nil)")
		}
		o.openRepo, o.author = open, author
		return nil
	}
}

// WithEvidenceSigner signs the proof evidence of the rollbacks the console
// drives.
func WithEvidenceSigner(sv signature.SignerVerifier) Option {
	return func(o *options) error {
		if sv == nil {
			return errors.New("console: WithEvidenceSigner(nil)")
		}
		o.signer = sv
		return nil
	}
}

// WithUnsignedEvidence commits the proof evidence of the rollbacks the
// console drives as unsigned statements.
func WithUnsignedEvidence() Option {
	return func(o *options) error { o.unsigned = true; return nil }
}

// drives are the rollouts the console drives: each in a goroutine the
// Server owns, stopped by Close.
type drives struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Close stops the rollouts the console drives and waits for them: each
// stops between steps, its state in the config repository (rollout
// resume continues it).
func (s *Server) Close() error {
	s.drives.cancel()
	s.drives.wg.Wait()
	return nil
}

// actor names the session's operator in a commit: its tenant and token
// id, never the token.
func actor(ss *session) string {
	return ss.who.Tenant + "/" + ss.who.TokenID
}

// reasonOf is the form's reason, or a refusal naming the action.
func (s *Server) reasonOf(w http.ResponseWriter, r *http.Request, ss *session, what string) (string, bool) {
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		s.fail(w, r, ss, http.StatusBadRequest, what+": a reason is required; nothing was done", nil)
		return "", false
	}
	return reason, true
}

// rolloutRefusal is the status of a driver's refusal (a conflict with
// the pool's state, said as it is), or 502 for the rest.
func rolloutRefusal(err error) int {
	for _, e := range []error{rollout.ErrRefused, rollout.ErrNoRollout, rollout.ErrInProgress, rollout.ErrChanged, gitops.ErrConflict} {
		if errors.Is(err, e) {
			return http.StatusConflict
		}
	}
	return http.StatusBadGateway
}

func (s *Server) failRollout(w http.ResponseWriter, r *http.Request, ss *session, what string, err error) {
	st := rolloutRefusal(err)
	if st == http.StatusConflict {
		s.fail(w, r, ss, st, what+": "+Clean(err.Error()), nil)
		return
	}
	s.fail(w, r, ss, st, what, err)
}

// abort stops the pool's running rollout (before routing), recording the
// operator and the reason as the commit's trailers.
func (s *Server) abort(w http.ResponseWriter, r *http.Request, ss *session) {
	p, id := r.PathValue("pool"), r.PathValue("id")
	what := "abort rollout " + id
	reason, ok := s.reasonOf(w, r, ss, what)
	if !ok {
		return
	}
	if s.openRepo == nil {
		s.fail(w, r, ss, http.StatusConflict, what+": this console only reads (it was started without a config repository to write to)", nil)
		return
	}
	repo, err := s.openRepo(r.Context())
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, what, err)
		return
	}
	d := &rollout.Driver{Repo: repo, Branch: s.branch, Pool: p, Author: s.author, Actor: actor(ss)}
	st, err := d.Status(r.Context())
	if err != nil {
		s.failRollout(w, r, ss, what, err)
		return
	}
	if st.Rollout == nil || st.Rollout.ID != id {
		s.fail(w, r, ss, http.StatusConflict, what+": it is not the rollout of pool "+p+" now; nothing was done", nil)
		return
	}
	if _, err := d.Abort(r.Context(), reason); err != nil {
		s.failRollout(w, r, ss, what, err)
		return
	}
	http.Redirect(w, r, "/pools/"+url.PathEscape(p)+"/rollouts/"+url.PathEscape(id), http.StatusSeeOther)
}

// rollbackRefusal says why this console cannot roll back, or "".
func (s *Server) rollbackRefusal() string {
	switch {
	case s.openRepo == nil:
		return "this console only reads (it was started without a config repository to write to)"
	case s.signer == nil && !s.unsigned:
		return "this console has no evidence key to sign a rollback's proofs (start it with --sign-key, or --unsigned-evidence)"
	case len(s.runtimes) == 0:
		return "this console has no runtime to drive a rollback on (--runtime)"
	}
	return ""
}

// rollback starts a rollout of the pool back to a retained generation,
// recording the operator and the reason as the start commit's trailers,
// drives it in a goroutine the Server owns, and shows its live timeline.
func (s *Server) rollback(w http.ResponseWriter, r *http.Request, ss *session) {
	p, to := r.PathValue("pool"), strings.TrimSpace(r.PostForm.Get("to"))
	what := "roll pool " + p + " back"
	reason, ok := s.reasonOf(w, r, ss, what)
	if !ok {
		return
	}
	if why := s.rollbackRefusal(); why != "" {
		s.fail(w, r, ss, http.StatusConflict, what+": "+why, nil)
		return
	}
	if to == "" {
		s.fail(w, r, ss, http.StatusBadRequest, what+": choose the retained generation to go back to", nil)
		return
	}
	// The fleet is the runtime that serves the pool.
	var fleet rollout.Fleet
	for _, rt := range s.runtimes {
		if _, err := rt.Client.PoolStatus(r.Context(), p); err == nil {
			fleet = rt.Client
			break
		}
	}
	if fleet == nil {
		s.fail(w, r, ss, http.StatusConflict, what+": no runtime of this console serves pool "+p, nil)
		return
	}
	repo, err := s.openRepo(r.Context())
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, what, err)
		return
	}
	d := &rollout.Driver{Repo: repo, Branch: s.branch, Pool: p, Fleet: fleet, Signer: s.signer, UnsignedEvidence: s.signer == nil && s.unsigned,
		Author: s.author, Actor: actor(ss), Reason: reason}
	ro, err := d.Start(r.Context(), to, true)
	if err != nil {
		s.failRollout(w, r, ss, what+" to "+to, err)
		return
	}
	s.drives.wg.Add(1)
	go func() {
		defer s.drives.wg.Done()
		got, err := d.Drive(s.drives.ctx, ro.ID)
		switch {
		case err != nil:
			s.log.Warn("console: rollback", "pool", p, "rollout", ro.ID, "err", err)
		default:
			s.log.Info("console: rollback", "pool", p, "rollout", ro.ID, "status", got.Status)
		}
	}()
	http.Redirect(w, r, "/pools/"+url.PathEscape(p)+"/rollouts/"+url.PathEscape(ro.ID), http.StatusSeeOther)
}

// rollbackTargets are the generations a rollback may go back to
// (draining, then retained, newest first).
func rollbackTargets(st *pool.State) []string {
	var out []string
	for _, want := range []string{pool.Draining, pool.Retained} {
		for i := len(st.Generations) - 1; i >= 0; i-- {
			if g := st.Generations[i]; g.State == want {
				out = append(out, g.ID)
			}
		}
	}
	return out
}

// Abortable reports whether a rollout may still be aborted: it has not
// ended and has not routed claims (after routing, a rollback is the way
// back).
func Abortable(rec *rollout.Record) bool {
	if rec.Outcome != pool.RolloutRunning && rec.Outcome != pool.RolloutFailed {
		return false
	}
	return slices.Index(rollout.Phases, rec.Phase) < slices.Index(rollout.Phases, rollout.PhaseRoute)
}
