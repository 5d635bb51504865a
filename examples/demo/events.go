package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/deliver"
)

// receiver is the demo's webhook destination: it checks each message's
// signature, fails the first attempts, then accepts, and acts on each
// idempotency key once.
type receiver struct {
	secret []byte
	mu     sync.Mutex
	calls  int
	acted  map[string]string // key -> the id it answered
	order  []string
	texts  []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	key := req.Header.Get("Idempotency-Key")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if err := deliver.Verify(r.secret, req.Header.Get("Slipway-Signature"), body, 5*time.Minute, time.Now()); err != nil {
		fmt.Printf("  | receiver: %s refused: %v\n", key, err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if r.calls <= 2 {
		fmt.Printf("  | receiver: attempt for %s: 500 (the receiver is failing its first attempts)\n", key)
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	if id, ok := r.acted[key]; ok {
		fmt.Printf("  | receiver: %s again: already acted on as %s (no second effect)\n", key, id)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
		return
	}
	var m controlapi.Message
	_ = json.Unmarshal(body, &m)
	id := fmt.Sprintf("msg-%d", len(r.acted)+1)
	r.acted[key] = id
	r.order = append(r.order, key)
	r.texts = append(r.texts, m.Text)
	fmt.Printf("  | receiver: %s (%s #%d): acted on as %s: %q\n", key, m.Kind, m.Seq, id, strings.TrimSpace(m.Text))
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

// eventsAndDelivery shows a job's ordered event stream followed live (the
// follower stopped and resumed without a gap or a repeat), delivery to a
// webhook that fails its first attempts (each message acted on once, with a
// receipt), a credential redacted before delivery, and a job canceled
// mid-command with its cleanup evidence.
func eventsAndDelivery(sh shell, work, here, server string, as func(string, ...string) []string) error {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	secretHex := []byte(hex.EncodeToString(secret))
	if err := os.WriteFile(filepath.Join(work, "hooks.secret"), secretHex, 0o600); err != nil {
		return err
	}
	rcv := &receiver{secret: secretHex, acted: map[string]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	section("destinations", "acme's webhook: its URL and kinds in tenants/acme.yaml, its HMAC secret by reference (a file on the control plane's host)")
	acme := mustRead(filepath.Join(here, "control", "tenants", "acme.yaml")) + fmt.Sprintf(`destinations:
  - name: hooks
    url: http://%s/hook
    kinds: [stdout, result]
    requiresResult: true
    secretRef: {file: %s}
    maxAttempts: 8
`, ln.Addr(), filepath.Join(work, "hooks.secret"))
	if err := commitConfig(work, "", "acme: a webhook destination", map[string]string{"tenants/acme.yaml": acme}); err != nil {
		return err
	}
	time.Sleep(time.Second) // the control plane reads the repository every 300 ms

	tok, err := os.ReadFile(filepath.Join(work, "acme.token"))
	if err != nil {
		return err
	}
	c, err := controlapi.NewClient(server, strings.TrimSpace(string(tok)))
	if err != nil {
		return err
	}
	ctx := context.Background()
	section("events", "a job's ordered, durable stream, followed live over SSE; the follower stops after two lines and resumes from its last id")
	fakeToken := "ghp_" + strings.Repeat("A1b2C3d4E5", 4)[:36]
	j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"sh", "-c",
		"for i in 1 2 3; do echo line $i; sleep 0.5; done; echo deploying with " + fakeToken + "; echo line 4"}}})
	if err != nil {
		return err
	}
	fmt.Printf("  submitted %s\n", j.ID)
	var last int64
	var seen []int64
	lines := 0
	errStop := errors.New("stop")
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = c.Follow(fctx, j.ID, controlapi.FollowOptions{}, func(e controlapi.Event) error {
		seen, last = append(seen, e.Seq), e.Seq
		fmt.Printf("  follower 1: #%d %s %s\n", e.Seq, e.Kind, eventText(e))
		if e.Kind == controlapi.KindStdout {
			if lines++; lines == 2 {
				return errStop
			}
		}
		return nil
	})
	cancel()
	if !errors.Is(err, errStop) {
		return fmt.Errorf("follower 1: %v", err)
	}
	fmt.Printf("  follower 1 stopped after #%d; follower 2 resumes with Last-Event-ID: %d\n", last, last)
	fctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	err = c.Follow(fctx, j.ID, controlapi.FollowOptions{After: last}, func(e controlapi.Event) error {
		seen = append(seen, e.Seq)
		fmt.Printf("  follower 2: #%d %s %s\n", e.Seq, e.Kind, eventText(e))
		return nil
	})
	cancel()
	if err != nil {
		return fmt.Errorf("follower 2: %v", err)
	}
	for i, s := range seen {
		if s != int64(i+1) {
			return fmt.Errorf("the followers saw %v: a gap or a repeat", seen)
		}
	}
	fmt.Printf("  together: #1..#%d, no gap, no repeat\n", len(seen))

	section("delivery", "the webhook failed its first attempts: retried with the same idempotency key, each message acted on once, the result published on its receipt")
	deadline := time.Now().Add(60 * time.Second)
	for {
		cur, err := c.Get(ctx, j.ID)
		if err != nil {
			return err
		}
		if cur.ResultPublished != nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s's result was not published: %+v", j.ID, cur.Delivery)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := sh.run(0, as("acme", "job", "show", j.ID)...); err != nil {
		return err
	}
	rcv.mu.Lock()
	texts := strings.Join(rcv.texts, "\n")
	calls, acted := rcv.calls, len(rcv.acted)
	rcv.mu.Unlock()
	if strings.Contains(texts, fakeToken) || !strings.Contains(texts, "REDACTED") {
		return fmt.Errorf("the credential reached the receiver unredacted: %q", texts)
	}
	fmt.Printf("  the receiver: %d requests, %d messages acted on, each once; the token arrived as [REDACTED ...]\n", calls, acted)

	section("job cancel", "a job canceled mid-command: canceling until the runtime shows the sandbox gone and the claim's token refused")
	k, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"sh", "-c", "echo working; sleep 60; echo never printed"}}})
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		cur, err := c.Get(ctx, k.ID)
		if err != nil {
			return err
		}
		if cur.State == controlapi.Running {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s did not start: %s", k.ID, cur.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if err := sh.run(0, as("acme", "job", "cancel", k.ID)...); err != nil {
		return err
	}
	if _, err := c.Wait(ctx, k.ID, 200*time.Millisecond, nil); err != nil {
		return err
	}
	return sh.run(0, as("acme", "job", "show", k.ID)...)
}

func eventText(e controlapi.Event) string {
	var d struct {
		Text  string `json:"text"`
		State string `json:"state"`
	}
	_ = json.Unmarshal(e.Data, &d)
	if d.State != "" {
		return d.State
	}
	return strings.TrimSpace(d.Text)
}
