package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// controlPlane shows the control plane in front of the runtime: two
// tenants, one flooding the queue into 429s while the other's job still
// runs; a job stopped at its deadline with its stop outcome; a job refused
// for budget; an old job shown with its profile as it was.
func controlPlane(sh shell, work, here string, rt *runtimeProc) error {
	section("tenants", "tenants/, profiles/ and pricing.yaml reviewed into config.git like code (git push)")
	if err := commitConfig(work, filepath.Join(here, "control"), "tenants acme and globex, profiles, prices", nil); err != nil {
		return err
	}
	db := "sqlite:control.db"
	tokens := map[string]string{}
	for _, t := range []string{"acme", "globex"} {
		section("tenant token create", "%s's API token: printed once (kept in %s.token here), stored as a hash", t, t)
		out, err := sh.capture("tenant", "token", "create", t, "--db", db)
		if err != nil {
			return fmt.Errorf("tenant token create %s: %w", t, err)
		}
		f := filepath.Join(work, t+".token")
		if err := os.WriteFile(f, out, 0o600); err != nil {
			return err
		}
		tokens[t] = f
	}

	section("control serve", "the control plane: only it holds the runtime's token; 3 jobs active at once, 2 per tenant")
	server, stop, err := serveControl(sh, db, rt, "--max-active", "3", "--config-refresh", "300ms", "--grace", "1s")
	if err != nil {
		return err
	}
	defer stop()
	as := func(tenant string, args ...string) []string {
		return append(append([]string{}, args[0], args[1]), append([]string{"--control", server, "--token-file", tenant + ".token"}, args[2:]...)...)
	}

	section("job submit", "globex floods: its queue bound is 4, so the flood gets 429 with Retry-After and the reason (exit 1)")
	for i := 1; ; i++ {
		code, out, err := sh.outcome(as("globex", "job", "submit", "--pool", "agents", "--profile", "standard", "--", "sleep", "3")...)
		if err != nil {
			return err
		}
		if code != 0 {
			fmt.Printf("$ slipway job submit ... (globex, job %d)\n%s  (exit %d)\n", i, indentText(out), code)
			if !strings.Contains(out, "429") || !strings.Contains(out, "tenant_queue_full") {
				return fmt.Errorf("globex's flood: want a 429 tenant_queue_full, got: %s", out)
			}
			break
		}
		fmt.Printf("  globex job %d: %s", i, out)
		if i > 20 {
			return fmt.Errorf("globex's flood was never refused")
		}
	}
	section("job submit --wait", "acme's job runs meanwhile: a freed slot goes to the tenant with the fewest active jobs")
	start := time.Now()
	if err := sh.run(0, as("acme", "job", "submit", "--pool", "agents", "--profile", "standard", "--wait", "--", "sh", "-c", "echo hello from acme in $(hostname)")...); err != nil {
		return err
	}
	fmt.Printf("  acme's job ended %.1fs after it was submitted, with globex's flood queued\n", time.Since(start).Seconds())

	section("job submit --wait", "a job past its deadline (profile short: 5s): SIGTERM, a grace, and its stop outcome (exit 1)")
	code, out, err := sh.outcome(as("acme", "job", "submit", "--pool", "agents", "--profile", "short", "--wait", "-o", "json", "--",
		"sh", "-c", "trap 'echo TERM received, saving work; exit 0' TERM; i=0; while :; do i=$((i+1)); echo working $i; sleep 1; done")...)
	if err != nil {
		return err
	}
	var dj struct{ ID, State, StopOutcome string }
	var derr error
	if i := strings.Index(out, "{"); i >= 0 {
		derr = json.NewDecoder(strings.NewReader(out[i:])).Decode(&dj) // then the CLI's last word on stderr
	}
	if derr != nil || code != 1 || dj.State != "deadline_exceeded" {
		return fmt.Errorf("the deadline job: exit %d, %v:\n%s", code, derr, out)
	}
	fmt.Printf("  job %s: %s, stop outcome %s (exit %d)\n", dj.ID, dj.State, dj.StopOutcome, code)

	section("job submit", "globex asks for a 2-hour job: its worst case (2h at 1 credit/h) exceeds its budget of 1 credit a day (exit 1)")
	if err := sh.run(1, as("globex", "job", "submit", "--pool", "agents", "--profile", "long", "--", "true")...); err != nil {
		return err
	}

	section("profiles", "profile short changes (5s becomes 10s) after acme's deadline job ran")
	if err := commitConfig(work, "", "short: ten seconds", map[string]string{"profiles/short.yaml": strings.Replace(mustRead(filepath.Join(here, "control", "profiles", "short.yaml")), "maxDuration: 5s", "maxDuration: 10s", 1)}); err != nil {
		return err
	}
	time.Sleep(time.Second) // the control plane reads the repository every 300 ms
	section("job show", "the old job, interpreted with its profile as it was at its revision; its whole story")
	if err := sh.run(0, as("acme", "job", "show", dj.ID)...); err != nil {
		return err
	}
	if err := operatorQuestions(sh, db, as, "acme", dj.ID); err != nil {
		return err
	}
	if err := eventsAndDelivery(sh, work, here, server, as); err != nil {
		return err
	}
	section("job list", "globex's jobs: queued ones drain two at a time")
	if err := sh.run(0, as("globex", "job", "list")...); err != nil {
		return err
	}
	return consoleUp(sh, work, db, server, rt)
}

// serveControl starts `slipway control serve` on config.git and db in
// front of the runtime rt (pool agents), with the extra arguments, and
// returns its URL and how to stop it.
func serveControl(sh shell, db string, rt *runtimeProc, extra ...string) (string, func(), error) {
	args := append([]string{"control", "serve", "--repo", "config.git", "--db", db, "--listen", "127.0.0.1:0",
		"--pool-runtime", "agents=" + rt.server + "," + rt.token}, extra...)
	fmt.Printf("$ slipway %s &\n", strings.Join(args, " "))
	srv := exec.Command(planeBin(sh, "SLIPWAY_CONTROL_BIN"), args...)
	srv.Dir = sh.dir
	stderr, err := srv.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := srv.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		srv.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			srv.Process.Kill()
		}
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "serving on "); ok {
				fmt.Printf("  | control: %s\n", sc.Text())
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a, stop, nil
	case <-time.After(60 * time.Second):
		stop()
		return "", nil, fmt.Errorf("control serve did not start")
	}
}

// consoleUp starts the operator console over this control plane, the
// runtime and config.git, and prints its URL and an operator token's file;
// with CONSOLE=1 (make demo CONSOLE=1) it keeps everything up until
// Ctrl-C.
func consoleUp(sh shell, work, db, server string, rt *runtimeProc) error {
	section("console serve", "the operator console: jobs with live events, runs with their lineage, pools, generations, rollouts")
	out, err := sh.capture("tenant", "token", "create", "ops", "--scope", "operator", "--db", db)
	if err != nil {
		return fmt.Errorf("operator token: %w", err)
	}
	opsFile := filepath.Join(work, "ops.token")
	if err := os.WriteFile(opsFile, out, 0o600); err != nil {
		return err
	}
	args := []string{"console", "serve", "--control", server, "--runtime", rt.server, "--token-file", rt.token, "--repo", "config.git", "--listen", "127.0.0.1:0"}
	fmt.Printf("$ slipway %s &\n", strings.Join(args, " "))
	c := exec.Command(sh.bin, args...)
	c.Dir = sh.dir
	stderr, err := c.StderrPipe()
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	defer func() { _ = c.Process.Signal(os.Interrupt); _ = c.Wait() }()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "serving on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		fmt.Printf("  console: http://%s/  (log in with the operator token in %s, or a tenant's: acme.token, globex.token)\n", a, opsFile)
	case <-time.After(60 * time.Second):
		return fmt.Errorf("console serve did not start")
	}
	if os.Getenv("CONSOLE") != "1" {
		return nil
	}
	fmt.Println("  CONSOLE=1: the console, the control plane and the runtime stay up; Ctrl-C ends the demo")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
	return nil
}

// outcome runs slipway and returns its exit code and its output (both
// streams).
func (s shell) outcome(args ...string) (int, string, error) {
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), b.String(), nil
	}
	return 0, b.String(), err
}

func mustRead(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// commitConfig clones config.git, copies the files of dir (or writes
// files), commits and pushes, the way a reviewed change lands.
func commitConfig(work, dir, subject string, files map[string]string) error {
	clone := filepath.Join(work, "config-edit")
	_ = os.RemoveAll(clone)
	git := func(args ...string) error {
		fmt.Printf("$ git %s\n", strings.Join(args, " "))
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		if _, err := os.Stat(clone); err == nil {
			cmd.Dir = clone
		}
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=demo", "GIT_AUTHOR_EMAIL=demo@example.invalid",
			"GIT_COMMITTER_NAME=demo", "GIT_COMMITTER_EMAIL=demo@example.invalid")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := git("clone", "-q", "config.git", "config-edit"); err != nil {
		return err
	}
	if files == nil {
		files = map[string]string{}
	}
	if dir != "" {
		if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)] = mustRead(p)
			return nil
		}); err != nil {
			return err
		}
	}
	for rel, body := range files {
		p := filepath.Join(clone, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	if err := git("add", "-A"); err != nil {
		return err
	}
	if err := git("commit", "-q", "-m", subject); err != nil {
		return err
	}
	return git("push", "-q", "origin", "HEAD:main")
}
