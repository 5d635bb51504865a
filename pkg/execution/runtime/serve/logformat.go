package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sync"
)

// Log formats of Config.LogFormat.
const (
	// LogJSON: every line is a JSON object (log/slog's JSON handler): time,
	// level, msg, and on the lines about a run its ids.
	LogJSON = "json"
	// LogText: plain lines, and slog's text handler for the lines about a
	// run.
	LogText = "text"
)

// logger is the runtime's structured logger on w in format, and the
// writer its plain lines go to: w itself for LogText, for LogJSON a writer
// that makes each plain line a JSON record of its own.
func logger(w io.Writer, format string) (*slog.Logger, io.Writer, error) {
	switch format {
	case "", LogText:
		return slog.New(slog.NewTextHandler(w, nil)), w, nil
	case LogJSON:
		l := slog.New(slog.NewJSONHandler(w, nil))
		return l, &jsonLines{l: l}, nil
	}
	return nil, nil, fmt.Errorf("runtime: log format %q: want %s or %s", format, LogJSON, LogText)
}

// jsonLines turns the plain lines written to it into records of l: a
// line that starts with a time and a level (the warm pool's and the
// syncer's) keeps the level; a line that is a JSON object already passes
// through.
type jsonLines struct {
	mu  sync.Mutex
	l   *slog.Logger
	buf []byte
}

var leveled = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+ (INFO|WARN|ERROR) +`)

func (j *jsonLines) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = append(j.buf, p...)
	for {
		i := bytes.IndexByte(j.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(j.buf[:i])
		j.buf = j.buf[i+1:]
		if line == "" {
			continue
		}
		level := slog.LevelInfo
		if m := leveled.FindStringSubmatch(line); m != nil {
			_ = level.UnmarshalText([]byte(m[1]))
			line = line[len(m[0]):]
		}
		j.l.Log(context.Background(), level, line)
	}
}
