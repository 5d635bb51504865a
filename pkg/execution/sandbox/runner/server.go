package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Config is what a runner knows about itself.
type Config struct {
	// Digest is "sha256:<hex>" of the runner's executable (see SelfDigest).
	Digest string
	// Generation and SandboxID are the ones it was started for.
	Generation string
	SandboxID  string
	// Workdir is the working directory of a command whose request names
	// none: the sandbox's workspace.
	Workdir string
	// Env is the base environment of every command ("NAME=value"); a
	// request's Env is added over it. Nil means none.
	Env []string
	// MaxConns bounds the connections served at once (DefaultMaxConns
	// when 0); more wait to be accepted.
	MaxConns int
	// Log receives one line per connection-level failure; nil discards.
	Log io.Writer
	// Launcher, when set, is the program every command is started
	// through (the runner's own executable: see Launch), which makes the
	// command the OOM killer's first choice before it execs it. "" starts
	// commands directly.
	Launcher string
	// Events, when set, is the events socket's listener (ListenEvents):
	// Serve answers it too, and the commands' environment (Env) should
	// name its path in EnvEvents.
	Events net.Listener
}

// DefaultMaxConns is Config.MaxConns when 0.
const DefaultMaxConns = 64

// SelfDigest is "sha256:<hex>" of the running executable, read through
// /proc/self/exe: the file the kernel is running, whatever path it was
// started by.
func SelfDigest() (string, error) {
	return FileDigest("/proc/self/exe")
}

// FileDigest is "sha256:<hex>" of a file's contents.
func FileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Serve answers requests on ln until ctx ends, then closes ln, kills the
// commands still running and returns ctx's error once every connection is
// done. It returns earlier, with an error, if ln fails.
func Serve(ctx context.Context, ln net.Listener, cfg Config) error {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	s := &server{cfg: cfg, started: time.Now(), slots: make(chan struct{}, cfg.MaxConns), events: newEventHub()}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Events != nil {
		done := make(chan struct{})
		go func() { defer close(done); s.serveEvents(ctx, cfg.Events) }()
		defer func() { <-done }()
		defer cancel()
	}
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		conn, err := ln.Accept()
		if err != nil {
			<-s.slots
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("runner: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-s.slots }()
			s.serveConn(ctx, conn)
		}()
	}
}

type server struct {
	cfg     Config
	started time.Time
	slots   chan struct{}
	events  *eventHub

	mu      sync.Mutex
	running int
}

// frameWriter serialises frames onto a connection; after the first write
// error it drops frames (the client is gone) and reports broken.
type frameWriter struct {
	mu     sync.Mutex
	w      io.Writer
	broken bool
}

func (fw *frameWriter) write(f *Frame) bool {
	b, err := json.Marshal(f)
	if err != nil {
		b, _ = json.Marshal(&Frame{Type: FrameError, Error: &Error{Code: ErrCodeInternal, Message: err.Error()}})
	}
	b = append(b, '\n')
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.broken {
		return false
	}
	if _, err := fw.w.Write(b); err != nil {
		fw.broken = true
		return false
	}
	return true
}

func (fw *frameWriter) fail(code, format string, args ...any) {
	fw.write(&Frame{Type: FrameError, Error: &Error{Code: code, Message: fmt.Sprintf(format, args...)}})
}

func (s *server) serveConn(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	r := bufio.NewReaderSize(conn, 64<<10)
	fw := &frameWriter{w: conn}
	for {
		line, err := readLine(r, MaxRequestBytes)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				fmt.Fprintf(s.cfg.Log, "runner: read request: %v\n", err)
				if errors.Is(err, ErrProtocol) {
					fw.fail(ErrCodeBadRequest, "%v", err)
				}
			}
			return
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			fw.fail(ErrCodeBadRequest, "malformed request: %v", err)
			return
		}
		if req.Version < MinProtocolVersion || req.Version > ProtocolVersion {
			fw.fail(ErrCodeVersion, "protocol version %d: this runner speaks %d to %d", req.Version, MinProtocolVersion, ProtocolVersion)
			return
		}
		switch req.Op {
		case OpIdentity:
			if !fw.write(&Frame{Type: FrameIdentity, Identity: s.identity()}) {
				return
			}
		case OpPing:
			s.mu.Lock()
			n := s.running
			s.mu.Unlock()
			if !fw.write(&Frame{Type: FramePong, Pong: &Pong{Time: time.Now().UTC(), Running: n, EventsRejected: s.events.Rejected()}}) {
				return
			}
		case OpExec:
			if req.Exec == nil {
				fw.fail(ErrCodeBadRequest, "exec request without exec")
				return
			}
			s.exec(ctx, r, fw, req.Exec)
			return // an exec ends its connection
		default:
			fw.fail(ErrCodeBadRequest, "unknown op %q", req.Op)
			return
		}
	}
}

func (s *server) identity() *Identity {
	return &Identity{
		RunnerBinarySHA256: s.cfg.Digest,
		LegacyRunnerDigest: s.cfg.Digest,
		Generation:         s.cfg.Generation,
		SandboxID:          s.cfg.SandboxID,
		ProtocolVersion:    ProtocolVersion,
		MinProtocolVersion: MinProtocolVersion,
		Pid:                os.Getpid(),
		Started:            s.started.UTC(),
	}
}

// readLine reads one newline-terminated line of at most max bytes, without
// the newline. A longer line is an ErrProtocol error.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > max+1 {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, max)
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return nil, fmt.Errorf("%w: connection ended inside a line", ErrProtocol)
		default:
			return nil, err
		}
	}
}
