package controlapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// FollowOptions say where Follow starts and what it reports besides
// events.
type FollowOptions struct {
	// After is the last sequence already seen (0: from the start).
	After int64
	// NoFollow stops at the end of what is stored instead of waiting for
	// the stream's result event.
	NoFollow bool
	// OnGap is told of output events lost to retention.
	OnGap func(TrimmedData)
	// OnReconnect is told of a dropped connection before Follow resumes.
	OnReconnect func(err error)
}

// Follow reads a job's event stream (GET /v1/jobs/{id}/events), calling
// on with each event in order, once: after a dropped connection it resumes
// with Last-Event-ID by itself. It returns nil after the result event (or,
// with NoFollow, at the end of what is stored), on's error, ctx's, or the
// API's refusal (404 for a job that is not the tenant's).
func (c *Client) Follow(ctx context.Context, id string, o FollowOptions, on func(Event) error) error {
	last := o.After
	retry := time.Second
	hc := &http.Client{Transport: c.http.Transport} // no timeout: a stream lasts
	for {
		done, err := c.followOnce(ctx, hc, id, o, &last, &retry, on)
		var stop *stopError
		if errors.As(err, &stop) {
			return stop.err
		}
		if done || ctx.Err() != nil {
			return err
		}
		var api *APIError
		if errors.As(err, &api) && api.Status < 500 && api.Status != http.StatusTooManyRequests {
			return err
		}
		if o.OnReconnect != nil {
			o.OnReconnect(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retry):
		}
	}
}

// stopError carries the callback's error out of the reading loop.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

// followOnce reads one connection; done says the stream ended (or the
// NoFollow read did).
func (c *Client) followOnce(ctx context.Context, hc *http.Client, id string, o FollowOptions, last *int64, retry *time.Duration, on func(Event) error) (bool, error) {
	q := url.Values{}
	if o.NoFollow {
		q.Set("follow", "false")
	}
	path := c.base + "/v1/jobs/" + url.PathEscape(id) + "/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return true, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(b, &e.Body)
		return false, e
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	var kind string
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) == 0 {
				kind = ""
				continue
			}
			switch kind {
			case "end":
				return true, nil
			case "error":
				var td TrimmedData
				if err := json.Unmarshal(data, &td); err == nil && o.OnGap != nil {
					o.OnGap(td)
				}
			default:
				e, err := DecodeEvent(data)
				if err != nil {
					return true, fmt.Errorf("control plane: job %s: event after %d: %w", id, *last, err)
				}
				if e.Seq <= *last {
					break // seen before this connection
				}
				if err := on(e); err != nil {
					return true, &stopError{err}
				}
				*last = e.Seq
				if e.Kind == KindResult {
					return true, nil
				}
			}
			kind, data = "", data[:0]
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("retry:")):
			if ms, err := strconv.Atoi(strings.TrimSpace(string(line[len("retry:"):]))); err == nil && ms > 0 {
				*retry = time.Duration(ms) * time.Millisecond
			}
		case bytes.HasPrefix(line, []byte("event:")):
			kind = strings.TrimSpace(string(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			d := line[len("data:"):]
			if len(d) > 0 && d[0] == ' ' {
				d = d[1:]
			}
			data = append(data, d...)
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	if o.NoFollow {
		return true, nil
	}
	return false, io.ErrUnexpectedEOF
}

// DecodeEvent reads one event's SSE data (the data lines of one event
// joined). The control plane writes every event in one shape (job, seq,
// at, kind and data, in
// that order, data last and on one line), which is read here directly:
// encoding/json would scan the data twice and copy it. Anything else is
// read by encoding/json. Data is the server's bytes as sent (a JSON object
// checked when it was appended); unmarshalling it reports any fault.
func DecodeEvent(b []byte) (Event, error) {
	if e, ok := readEventShape(b); ok {
		return e, nil
	}
	var e Event
	err := json.Unmarshal(b, &e)
	return e, err
}

// readEventShape reads appendEventJSON's shape: {"job":"J","seq":N,
// "at":"T","kind":"K","data":{...}} with J and K plain (no escapes).
func readEventShape(b []byte) (Event, bool) {
	var e Event
	rest, ok := bytes.CutPrefix(b, []byte(`{"job":"`))
	if !ok {
		return e, false
	}
	job, rest, ok := plainJSONString(rest)
	if !ok {
		return e, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"seq":`)); !ok {
		return e, false
	}
	i := bytes.IndexByte(rest, ',')
	if i <= 0 {
		return e, false
	}
	seq, err := strconv.ParseInt(string(rest[:i]), 10, 64)
	if err != nil {
		return e, false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"at":"`)); !ok {
		return e, false
	}
	at, rest, ok := plainJSONString(rest)
	if !ok {
		return e, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return e, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"kind":"`)); !ok {
		return e, false
	}
	kind, rest, ok := plainJSONString(rest)
	if !ok {
		return e, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"data":`)); !ok {
		return e, false
	}
	if len(rest) < 3 || rest[0] != '{' || rest[len(rest)-1] != '}' || rest[len(rest)-2] != '}' {
		return e, false
	}
	e.Job, e.Seq, e.At, e.Kind = job, seq, t, EventKind(kind)
	e.Data = json.RawMessage(bytes.Clone(rest[:len(rest)-1]))
	return e, true
}

// plainJSONString reads a JSON string's body up to its closing quote when
// it has no escapes or control bytes.
func plainJSONString(b []byte) (string, []byte, bool) {
	for i, c := range b {
		switch {
		case c == '"':
			return string(b[:i]), b[i+1:], true
		case c == '\\' || c < 0x20:
			return "", nil, false
		}
	}
	return "", nil, false
}
