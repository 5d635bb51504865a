// Command slipway-runner is the runner artifact: a static binary that runs
// inside each sandbox, executes the commands the runtime sends over a unix
// socket and proves its identity. See package runner for the protocol.
//
//	slipway-runner serve --listen-fd 0 --generation G --sandbox ID --workdir DIR [--nofile N] [--egress-listen ADDR --egress-socket PATH]
//	                                      (--nofile: lowers its own RLIMIT_NOFILE, which every command inherits;
//	                                      commands start through "slipway-runner workload", which raises their
//	                                      oom_score_adj to 1000 and execs them)
//	                                      (with --egress-*: forwards ADDR, 127.0.0.1:PORT in the sandbox, to the
//	                                      egress proxy's unix socket PATH that the backend bound in)
//	slipway-runner serve --listen-unix PATH   (in a pod: generation and sandbox from $SLIPWAY_GENERATION, $SLIPWAY_SANDBOX_ID)
//	slipway-runner event KIND [--data JSON | --file F]
//	                                      (inside the sandbox: reports one of the workload's own events to the
//	                                      runner's socket $SLIPWAY_EVENTS; KIND is model_request, first_output,
//	                                      tool_call, file, diff or status; the data a JSON object)
//	slipway-runner connect PATH               (bridges stdin and stdout to the runner's socket: run through pod exec)
//	slipway-runner credential put NAME        (stdin becomes /run/slipway/credentials/NAME, mode 0400: run through pod exec)
//	slipway-runner credential rm NAME         (removes it; one not there is no error)
//	slipway-runner egress --listen ADDR --allow ENTRY[,ENTRY...]
//	                                      (an allow-list pool's egress proxy in a pod: one JSON line per attempt on stdout)
//	slipway-runner seed SRC DST           (copies the template's workspace SRC into the pod's workspace emptyDir DST:
//	                                      a Kubernetes init container of the template's image)
//	slipway-runner workspace tar DIR      (the workspace as a tar stream on stdout: a checkpoint's copy, through pod exec)
//	slipway-runner workspace restore DIR  (empties DIR and unpacks the tar stream on stdin: a resume, through pod exec)
//	slipway-runner workspace stop         (stops the workload's processes until stdin ends: a checkpoint's consistent copy)
//	slipway-runner version                (JSON: binary sha256, protocol, release version, commit, dirty, Go version)
//	slipway-runner install DIR [--refresh RDIR]
//	                                      (copies itself to DIR/slipway-runner: a Kubernetes init container;
//	                                      with --refresh, also the pod's refresh phase: RDIR/machine-id)
//	slipway-runner probe dial HOST:PORT   (exit 0: connected; 3: could not; IPv6 as [ADDR]:PORT)
//	slipway-runner probe write DIR        (exit 0: a file was written, read back and removed)
//	slipway-runner probe connect PROXY HOST:PORT
//	                                      (exit 0: the HTTP proxy at PROXY opened a tunnel to HOST:PORT; 3: it refused)
//
// The probes are what a rollout's proof checks run inside a sandbox, so
// they need no tool of the template's (no shell, no nc).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/internal/version"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "slipway-runner:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: slipway-runner serve|connect|credential|egress|seed|workspace|version|install|probe [flags]")
	}
	if args[0] == "connect" { // before hashing itself: it runs for every call through pod exec
		if len(args) != 2 {
			return fmt.Errorf("usage: slipway-runner connect SOCKET")
		}
		return runner.Bridge(args[1], os.Stdin, os.Stdout)
	}
	if args[0] == runner.LauncherArg { // every command starts through it: no hashing of itself
		if err := runner.Launch(args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "slipway-runner:", err)
			os.Exit(127)
		}
		return nil
	}
	if args[0] == "event" { // run by workloads, often: no hashing of itself
		return event(args[1:], os.Getenv(runner.EnvEvents), os.Stdin)
	}
	if args[0] == "credential" {
		return credential(args[1:], runner.CredentialDir)
	}
	if args[0] == "egress" {
		return egressProxy(args[1:], os.Stdout)
	}
	if args[0] == "seed" {
		return seed(args[1:], os.Stdout)
	}
	if args[0] == "workspace" {
		return workspace(args[1:], os.Stdin, os.Stdout, os.Stderr)
	}
	digest, err := runner.SelfDigest()
	if err != nil {
		return err
	}
	switch args[0] {
	case "version":
		v := version.Get()
		return json.NewEncoder(os.Stdout).Encode(map[string]any{
			"runnerBinarySha256": digest, "protocolVersion": runner.ProtocolVersion, "minProtocolVersion": runner.MinProtocolVersion,
			"version": v.Version, "commit": v.Commit, "dirty": v.Dirty, "untagged": v.Untagged, "goVersion": v.GoVersion})
	case "probe":
		return probe(args[1:])
	case "install":
		return install(args[1:], digest)
	case "serve":
	default:
		return fmt.Errorf("unknown command %q: want serve, connect, credential, egress, seed, workspace, version, install or probe", args[0])
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fd := fs.Int("listen-fd", 0, "file descriptor of the listening unix socket")
	sock := fs.String("listen-unix", "", "listen on a unix socket at this path instead of --listen-fd (in a pod)")
	cfg := runner.Config{Digest: digest, Env: os.Environ(), Log: os.Stderr}
	fs.StringVar(&cfg.Generation, "generation", os.Getenv(runner.EnvGeneration), "the generation this sandbox belongs to (default $"+runner.EnvGeneration+")")
	fs.StringVar(&cfg.SandboxID, "sandbox", os.Getenv(runner.EnvSandboxID), "the sandbox's id (default $"+runner.EnvSandboxID+")")
	fs.StringVar(&cfg.Workdir, "workdir", "", "default working directory of commands (default: the runner's own)")
	egressListen := fs.String("egress-listen", "", "forward this TCP address (127.0.0.1:PORT) to --egress-socket: the sandbox's egress proxy")
	egressSocket := fs.String("egress-socket", "", "the egress proxy's unix socket, bound into the sandbox")
	nofile := fs.Uint64("nofile", 0, "lower this process's RLIMIT_NOFILE (soft and hard) to this before serving: every command inherits it (0: leave it)")
	events := fs.String("events", "", "make the workload's events socket here, named in commands' $"+runner.EnvEvents+" (default: a private directory under $TMPDIR; \"off\": none)")
	launch := fs.Bool("launch-workloads", true, "start commands through this binary's \"workload\" launcher, which makes them the OOM killer's first choice")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if (*egressListen == "") != (*egressSocket == "") {
		return fmt.Errorf("serve: --egress-listen and --egress-socket go together")
	}
	if cfg.Workdir == "" {
		if cfg.Workdir, err = os.Getwd(); err != nil {
			return err
		}
	}
	if err := runner.Harden(); err != nil {
		return err
	}
	if *nofile > 0 {
		if err := runner.LowerNoFile(*nofile); err != nil {
			return err
		}
	}
	if *launch {
		cfg.Launcher = "/proc/self/exe"
	}
	var ln net.Listener
	if *sock != "" {
		ln, err = runner.ListenUnix(*sock)
	} else {
		ln, err = runner.ListenerFromFD(*fd)
	}
	if err != nil {
		return err
	}
	if *events != "off" {
		path := *events
		if path == "" {
			dir, err := os.MkdirTemp("", ".slipway-events-")
			if err == nil {
				path = filepath.Join(dir, "events.sock")
				defer os.RemoveAll(dir)
			} else {
				fmt.Fprintln(os.Stderr, "slipway-runner: no events socket:", err)
			}
		}
		if path != "" {
			eln, err := runner.ListenEvents(path)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			cfg.Events = eln
			cfg.Env = append(cfg.Env, runner.EnvEvents+"="+path)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *egressListen != "" {
		// Listening before Serve answers: once the backend sees the runner
		// ready, the proxy's address is taken by the runner, not a workload.
		eln, err := net.Listen("tcp", *egressListen)
		if err != nil {
			return fmt.Errorf("serve: egress: %w", err)
		}
		go func() {
			if err := runner.Forward(ctx, eln, *egressSocket); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "slipway-runner: egress forwarder:", err)
			}
		}()
	}
	if err := runner.Serve(ctx, ln, cfg); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// event reports one event of the workload to the runner's socket at
// path: the data is --data's JSON, --file's contents ("-": stdin), or
// none.
func event(args []string, path string, stdin io.Reader) error {
	usage := fmt.Errorf("usage: slipway-runner event KIND [--data JSON | --file F]")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usage
	}
	kind := args[0]
	fs := flag.NewFlagSet("event", flag.ContinueOnError)
	data := fs.String("data", "", "the event's data: a JSON object")
	file := fs.String("file", "", "read the event's data (a JSON object) from this file; - for stdin")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 || (*data != "" && *file != "") {
		return usage
	}
	if path == "" {
		return fmt.Errorf("event %s: $%s is not set: this command runs inside a sandbox, under its runner", kind, runner.EnvEvents)
	}
	// the kind is the runner's to check (and count when refused)
	var b []byte
	switch {
	case *data != "":
		b = []byte(*data)
	case *file == "-":
		var err error
		if b, err = io.ReadAll(io.LimitReader(stdin, runner.MaxEventBytes+1)); err != nil {
			return fmt.Errorf("event %s: stdin: %w", kind, err)
		}
	case *file != "":
		f, err := os.Open(*file)
		if err != nil {
			return fmt.Errorf("event %s: %w", kind, err)
		}
		b, err = io.ReadAll(io.LimitReader(f, runner.MaxEventBytes+1))
		f.Close()
		if err != nil {
			return fmt.Errorf("event %s: %s: %w", kind, *file, err)
		}
	}
	if len(b) > runner.MaxEventBytes {
		return fmt.Errorf("event %s: data is over %d bytes", kind, runner.MaxEventBytes)
	}
	if len(b) > 0 && !json.Valid(b) {
		return fmt.Errorf("event %s: data is not JSON (want an object)", kind)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return runner.SendEvent(ctx, path, kind, b)
}

// credential puts its standard input as a credential file in dir, or
// removes one: the Kubernetes backend places a claim's token this way, by
// a pod exec whose stdin carries it (never its arguments or environment).
// The exec runs as the container's user, so the file is the sandbox
// user's. dir must be in memory (the render's memory emptyDir).
func credential(args []string, dir string) error {
	if len(args) != 2 || (args[0] != "put" && args[0] != "rm") {
		return fmt.Errorf("usage: slipway-runner credential put NAME (data on stdin) | credential rm NAME")
	}
	if err := runner.CredentialName(args[1]); err != nil {
		return err
	}
	if args[0] == "rm" {
		return runner.RemoveCredential(dir, args[1])
	}
	if err := runner.InMemory(dir); err != nil {
		return err
	}
	return runner.PutCredential(dir, args[1], os.Stdin)
}

// install copies the running binary to DIR/slipway-runner, mode 0555,
// and checks that the copy is the binary that ran (digest): the init
// container of a rendered SandboxTemplate brings the runner, pinned by its
// image's digest, into the workspace container this way, since the runner
// image holds nothing else (no cp). With --refresh RDIR it first runs the
// pod's refresh phase (shape.RefreshPod): a fresh machine id in
// RDIR/machine-id, which the workspace container mounts read-only over
// /etc/machine-id.
func install(args []string, digest string) error {
	refresh := ""
	if len(args) == 3 && args[1] == "--refresh" && args[2] != "" {
		refresh, args = args[2], args[:1]
	}
	if len(args) != 1 {
		return fmt.Errorf("usage: slipway-runner install DIR [--refresh RDIR]")
	}
	if refresh != "" {
		res, err := shape.RefreshPod(refresh)
		if err != nil {
			return fmt.Errorf("install: %w", err)
		}
		fmt.Printf("refreshed %s: %s\n", res.Kind, res.Detail)
	}
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer src.Close()
	dst := filepath.Join(args[0], "slipway-runner")
	tmp, err := os.CreateTemp(args[0], ".slipway-runner-*")
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("install: %w", err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return fmt.Errorf("install: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if got, err := runner.FileDigest(tmp.Name()); err != nil || got != digest {
		return fmt.Errorf("install: the copy in %s is not the running binary %s", args[0], digest)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	fmt.Printf("installed %s (%s)\n", dst, digest)
	return nil
}

// probe answers no with exit 3 (and why, on stdout); exit 1 is a probe
// that could not run.
func probe(args []string) error {
	if len(args) == 3 && args[0] == "connect" {
		return probeConnect(args[1], args[2])
	}
	if len(args) != 2 {
		return fmt.Errorf("usage: slipway-runner probe dial HOST:PORT | probe write DIR | probe connect PROXY HOST:PORT")
	}
	switch args[0] {
	case "dial":
		c, err := net.DialTimeout("tcp", args[1], 3*time.Second)
		if err != nil {
			fmt.Printf("no connection to %s: %v\n", args[1], err)
			os.Exit(3)
		}
		c.Close()
		fmt.Printf("connected to %s\n", args[1])
		return nil
	case "write":
		f, err := os.CreateTemp(args[1], ".slipway-probe-*")
		if err != nil {
			fmt.Printf("cannot write in %s: %v\n", args[1], err)
			os.Exit(3)
		}
		defer os.Remove(f.Name())
		want := []byte("slipway probe\n")
		if _, err := f.Write(want); err != nil {
			f.Close()
			fmt.Printf("cannot write %s: %v\n", f.Name(), err)
			os.Exit(3)
		}
		if err := f.Close(); err != nil {
			return err
		}
		got, err := os.ReadFile(f.Name())
		if err != nil || string(got) != string(want) {
			fmt.Printf("%s did not read back: %v\n", f.Name(), err)
			os.Exit(3)
		}
		fmt.Printf("wrote and read back %s\n", f.Name())
		return nil
	}
	return fmt.Errorf("unknown probe %q: want dial, write or connect", args[0])
}

// probeConnect asks the HTTP proxy at proxy for a CONNECT tunnel to dest:
// an allow-list sandbox's proof that its proxy lets an approved
// destination through and refuses a denied one.
func probeConnect(proxy, dest string) error {
	c, err := net.DialTimeout("tcp", proxy, 3*time.Second)
	if err != nil {
		fmt.Printf("no connection to the proxy %s: %v\n", proxy, err)
		os.Exit(3)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Printf("the proxy %s did not answer: %v\n", proxy, err)
		os.Exit(3)
	}
	line = strings.TrimSpace(line)
	if f := strings.Fields(line); len(f) < 2 || f[1] != "200" {
		fmt.Printf("the proxy %s refused a tunnel to %s: %s\n", proxy, dest, line)
		os.Exit(3)
	}
	fmt.Printf("tunnel to %s through %s\n", dest, proxy)
	return nil
}
