package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// maxStop bounds how long `workspace stop` holds the workload stopped when
// its standard input stays open (a runtime that hangs): the workload goes
// on by itself after it.
const maxStop = 10 * time.Minute

// workspace is `slipway-runner workspace tar|restore|stop`, run through a
// pod exec by the Kubernetes backend for a checkpoint (package
// kubesandbox):
//
//	workspace tar DIR      the tree below DIR as a tar stream on stdout; what
//	                       is left out is named on stderr
//	workspace restore DIR  empties DIR and unpacks the tar stream on stdin
//	                       into it; a JSON report on stdout
//	workspace stop         SIGSTOP to the workload's processes (every process
//	                       of the container but the runner's), "stopped N" on
//	                       stdout; SIGCONT to them when stdin ends (or after
//	                       maxStop, or on SIGTERM), then "continued N"
func workspace(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	usage := fmt.Errorf("usage: slipway-runner workspace tar DIR | workspace restore DIR | workspace stop")
	if len(args) == 0 {
		return usage
	}
	switch {
	case args[0] == "tar" && len(args) == 2:
		w := bufio.NewWriterSize(stdout, 256<<10)
		if _, err := runner.WriteWorkspaceTar(args[1], w, func(name, why string) {
			fmt.Fprintf(stderr, "left out %s: %s\n", name, why)
		}); err != nil {
			return err
		}
		return w.Flush()
	case args[0] == "restore" && len(args) == 2:
		rep, err := runner.RestoreWorkspace(args[1], bufio.NewReaderSize(stdin, 256<<10))
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(rep)
	case args[0] == "stop" && len(args) == 1:
		return stopWorkload(stdin, stdout)
	}
	return usage
}

// stopWorkload holds the workload stopped while stdin stays open.
func stopWorkload(stdin io.Reader, stdout io.Writer) error {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("workspace stop: %w", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	s, err := runner.StopWorkload("/proc", runner.RunnerExe(exe))
	if err != nil {
		return fmt.Errorf("workspace stop: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "stopped %d\n", len(s.Pids)); err != nil {
		_ = s.Continue()
		return err
	}
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(ended)
	}()
	t := time.NewTimer(maxStop)
	defer t.Stop()
	why := ""
	select {
	case <-ended:
	case <-t.C:
		why = " (held longer than " + maxStop.String() + ")"
	case sig := <-sigs:
		why = " (" + sig.String() + ")"
	}
	if err := s.Continue(); err != nil {
		return fmt.Errorf("workspace stop: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "continued %d%s\n", len(s.Pids), why)
	return err
}
