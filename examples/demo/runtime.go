package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// runtimeDemo starts the runtime on the demo's config repository, claims a
// sandbox of the active generation, runs a command in it, and prints the
// run manifest.
func runtimeDemo(sh shell, work string) error {
	section("runtime serve", "follows config.git, verifies g1 against its policy, keeps 2 warm sandboxes (bubblewrap, no network)")
	// The template runs as uid 1000: the path to the runtime's state must be
	// traversable by it (the demo's folder is made 0700).
	if err := os.Chmod(work, 0o711); err != nil {
		return err
	}
	token := filepath.Join(work, "runtime.token")
	if err := os.WriteFile(token, []byte("demo-runtime-token-0123456789\n"), 0o600); err != nil {
		return err
	}
	args := []string{"runtime", "serve", "--config-repo", "config.git", "--state", "state", "--listen", "127.0.0.1:0", "--token-file", token}
	fmt.Printf("$ slipway %s &\n", strings.Join(args, " "))
	srv := exec.Command(sh.bin, args...)
	srv.Dir = sh.dir
	stderr, err := srv.StderrPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		srv.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			srv.Process.Kill()
		}
	}()
	addr := make(chan string, 1)
	warm := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Printf("  | %s\n", line)
			if a, ok := strings.CutPrefix(line, "serving on "); ok {
				addr <- a
			}
			if strings.HasPrefix(line, "warm pools: ") {
				select {
				case warm <- struct{}{}:
				default:
				}
			}
		}
	}()
	var server string
	select {
	case a := <-addr:
		server = "http://" + a
	case <-time.After(60 * time.Second):
		return fmt.Errorf("runtime serve did not start")
	}
	select {
	case <-warm:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("the runtime made no warm sandbox")
	}

	section("claim", "a sandbox of the active generation: run a command in it, release it")
	b, err := sh.capture("claim", "--server", server, "--token-file", token, "--pool", "agents", "--tenant", "demo", "--",
		"sh", "-c", "echo hello from $(pwd) as uid $(id -u); cat /etc/machine-id")
	if err != nil {
		return err
	}
	var res struct {
		RunID, SandboxID, Generation, Output string
		Warm                                 bool
		ExitCode                             int
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("claim printed no JSON: %v\n%s", err, b)
	}
	fmt.Printf("  run %s in sandbox %s, generation %s, warm %v, exit %d\n", res.RunID, res.SandboxID, res.Generation, res.Warm, res.ExitCode)
	for _, l := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		fmt.Printf("  > %s\n", l)
	}

	section("runs show", "the run manifest: which exact artifacts and policies produced the run")
	return sh.run(0, "runs", "show", res.RunID, "--state", "state")
}
