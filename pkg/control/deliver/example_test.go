package deliver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/slipway-dev/slipway/pkg/control/deliver"
)

// An agent's output made safe to post: terminal escapes and a
// bidirectional override removed, a carriage return read as a newline, a
// credential redacted, Slack's control sequences and @-mentions defused,
// and cut to the destination's bounds (the whole cleaned text kept for an
// artifact the message links to).
func ExampleFilter() {
	key := "AKIA" + "Q3H7Z2XK9MBW4TRP" // an AWS access key id the agent printed
	raw := "\x1b[31mFAIL\x1b[0m tests\rping <!channel> and @alice\n\u202eusing " + key + "\nline 3\nline 4\n"
	t := deliver.Filter([]byte(raw), deliver.Limits{MaxLines: 3})
	fmt.Printf("%q\n", t.Text)
	for _, r := range t.Redactions {
		fmt.Println("redacted:", r.Rule, "on line", r.Line)
	}
	fmt.Println("truncated:", t.Truncated, "dropped lines:", t.DroppedLines, "bytes:", t.DroppedBytes)
	fmt.Printf("full: %q\n", t.Full)
	// Output:
	// "FAIL tests\nping &lt;!channel&gt; and @\u200balice\nusing [REDACTED aws-access-key-id]\n"
	// redacted: aws-access-key-id on line 3
	// truncated: true dropped lines: 2 bytes: 14
	// full: "FAIL tests\nping <!channel> and @alice\nusing [REDACTED aws-access-key-id]\nline 3\nline 4\n"
}

// One attempt posted to a webhook that verifies the signature and answers
// with its message id; the key is the same on every attempt of the same
// message, and a 429 is a transient failure with the destination's
// Retry-After.
func ExamplePost() {
	secret := []byte("whsec-example")
	var answered atomic.Bool // the first answer is a 429
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := deliver.Verify(secret, r.Header.Get(deliver.HeaderSignature), body, 5*time.Minute, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if !answered.Swap(true) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Println("received", r.Header.Get(deliver.HeaderIdempotencyKey))
		json.NewEncoder(w).Encode(map[string]string{"id": "msg-42"})
	}))
	defer hook.Close()

	key := deliver.Key("j-7", 12, "slack-ops")
	body, _ := json.Marshal(map[string]string{"text": "job j-7 succeeded"})
	for range 2 {
		o := deliver.Post(context.Background(), hook.Client(), hook.URL, key, secret, body, time.Now())
		fmt.Printf("status %d delivered=%v id=%q retry=%v after=%s\n", o.Status, o.Delivered, o.ID, o.Retry, o.RetryAfter)
	}

	// A signature made with another secret, or too old, is refused.
	sig := deliver.Sign([]byte("other"), time.Now(), body)
	fmt.Println(deliver.Verify(secret, sig, body, 5*time.Minute, time.Now()))
	old := time.Unix(1_700_000_000, 0)
	err := deliver.Verify(secret, deliver.Sign(secret, old, body), body, 5*time.Minute, old.Add(10*time.Minute))
	fmt.Println(err)
	// Output:
	// status 429 delivered=false id="" retry=true after=7s
	// received j-7:12:slack-ops
	// status 200 delivered=true id="msg-42" retry=false after=0s
	// deliver: bad signature: no v1 signature matches
	// deliver: bad signature: timestamp 1700000000 is 10m0s from now, over the tolerance of 5m0s
}
