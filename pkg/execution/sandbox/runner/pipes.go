package runner

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// outputPipes are a command's stdout and stderr pipes, read by the runner
// under one lock: a read and the frames it makes happen together, so
// drain, holding the lock, can take whatever the command wrote and not yet
// read, and frame it before an event. Without that, an event could
// overtake output the command wrote before reporting it.
type outputPipes struct {
	mu   sync.Mutex
	r, w [2]*os.File
	out  [2]*streamWriter
	rc   [2]syscall.RawConn
	done sync.WaitGroup
	buf  [2][]byte
}

func newOutputPipes(o *outputLimiter) (*outputPipes, error) {
	p := &outputPipes{out: [2]*streamWriter{o.stream(StreamStdout), o.stream(StreamStderr)}}
	for i := range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			p.close()
			return nil, err
		}
		p.r[i], p.w[i] = r, w
		if p.rc[i], err = r.SyscallConn(); err != nil {
			p.close()
			return nil, err
		}
		p.buf[i] = make([]byte, ChunkBytes)
	}
	return p, nil
}

// started closes the write ends the command has its copies of (or failed
// to start with) and starts reading.
func (p *outputPipes) started() {
	for i := range 2 {
		p.w[i].Close()
		p.w[i] = nil
		p.done.Add(1)
		go p.read(i)
	}
}

// read reads pipe i until its end (or its read deadline).
func (p *outputPipes) read(i int) {
	defer p.done.Done()
	for {
		eof := false
		err := p.rc[i].Read(func(fd uintptr) bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			n, err := unix.Read(int(fd), p.buf[i])
			if errors.Is(err, unix.EAGAIN) {
				return false // wait until readable
			}
			if n > 0 {
				_, _ = p.out[i].Write(p.buf[i][:n])
			} else {
				eof = true
			}
			return true
		})
		if eof || err != nil {
			return
		}
	}
}

// drain frames what the command has written and the runner not yet read.
func (p *outputPipes) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range 2 {
		_ = p.rc[i].Control(func(fd uintptr) {
			for {
				n, err := unix.Read(int(fd), p.buf[i])
				if n <= 0 || err != nil {
					return
				}
				_, _ = p.out[i].Write(p.buf[i][:n])
			}
		})
	}
}

// wait waits for both pipes' ends, at most grace (a background process
// may hold them open), then stops reading.
func (p *outputPipes) wait(grace time.Duration) {
	for i := range 2 {
		_ = p.r[i].SetReadDeadline(time.Now().Add(grace))
	}
	p.done.Wait()
}

func (p *outputPipes) close() {
	for i := range 2 {
		if p.r[i] != nil {
			p.r[i].Close()
		}
		if p.w[i] != nil {
			p.w[i].Close()
		}
	}
}
