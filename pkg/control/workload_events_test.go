package control

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/control/deliver"
)

// A workload's events (slipway-runner event) enter the job's stream as the
// job engine puts them, in order with the output, and pass the delivery
// filter like output: a tool call whose data holds a token, terminal
// escapes and chat markup arrives redacted, stripped and escaped; a
// destination gets only the kinds it asked for.
func TestWorkloadEventsDeliveredFiltered(t *testing.T) {
	repo := configRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chat := newReceiver(t, "chat-secret", func(controlapi.Message, int) string { return "ok" })
	commit(t, repo, "destinations", func(tr *gitops.Tree) error {
		return tr.WriteFile("tenants/hooked.yaml", []byte(tenantWith("hooked",
			"  - {name: chat, url: '"+chat.srv.URL+"/in', kinds: [stdout, tool_call, file, result], requiresResult: true, secretRef: {file: "+secretFile(t, "chat-secret")+"}, ratePerSecond: 200}\n")))
	})
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := eventPlane(t, s, repo, EventConfig{})
	p.c.Delivery = testDelivery()
	j := submitJob(t, p, "hooked")

	tok := "gh" + "p_" + strings.Repeat("Zx9Qw2", 6)
	var streams atomic.Int64
	out := newOutput(p, &streams, j)
	at := time.Now()
	out.Append(0, "stdout", []byte("one\n"))
	out.Event(0, "tool_call", at, json.RawMessage(`{"tool":"curl","args":["-H","Authorization: token `+tok+`","\u001b]0;pwned\u0007<!channel>"]}`))
	out.Append(0, "stdout", []byte("two\n"))
	out.Event(0, "status", at, json.RawMessage(`{"summary":"half way"}`)) // not a kind chat asked for
	out.Event(0, "file", at, json.RawMessage(`{"path":"a.go"}`))
	out.Close()
	finishJob(t, s, j.ID, "")

	_, evs := allEvents(t, s, j.ID)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind))
	}
	if got := strings.Join(kinds, " "); !strings.HasPrefix(got, "state stdout tool_call stdout status file") {
		t.Fatalf("the job's stream: %s", got)
	}

	go runDelivery(ctx, p.c, p.st)
	waitFor(t, "the job's result delivered", 30*time.Second, func() bool {
		jj, _ := p.Get(ctx, "", j.ID)
		return jj.ResultPublished != nil
	})
	effects, order, _ := chat.snapshot()
	if got := order[j.ID]; len(got) != 5 || got[0] != 2 || got[1] != 3 || got[2] != 4 || got[3] != 6 {
		t.Errorf("chat acted on %v: want stdout 2, tool_call 3, stdout 4, file 6 (not status 5), then the result", got)
	}
	m := effects[deliver.Key(j.ID, 3, "chat")]
	if m.Kind != controlapi.KindToolCall || strings.Contains(m.Text, tok) || strings.ContainsAny(m.Text, "\x1b\x07") || strings.Contains(m.Text, "<!channel>") ||
		!strings.Contains(m.Text, "[REDACTED github-token]") || !strings.Contains(m.Text, `"tool":"curl"`) || len(m.Redacted) != 1 {
		t.Errorf("the tool call delivered as %+v", m)
	}
}
