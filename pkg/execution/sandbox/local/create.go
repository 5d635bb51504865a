package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// Create makes a sandbox: the template unpacked once per digest and
// mounted read-only as /, a private writable workspace (seeded from the
// template's working directory) at that directory, the runner read-only at
// sandbox.RunnerPath, a fresh machine id and whatever else the template's
// refresh label asks for, a tmpfs at /tmp and one at sandbox.CredentialDir,
// no network (an allow-list sandbox: its egress proxy, see
// sandbox.NetworkAllowList), pid, ipc and uts namespaces of its own, and spec.Limits. It
// returns once the runner has answered with the expected digest, generation
// and sandbox id, and the host has checked that the process answering runs
// the expected binary.
// The sandbox outlives ctx, which bounds only its creation.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	if err := validate(&spec); err != nil {
		return nil, err
	}
	if err := b.checkLimits(spec.Limits); err != nil {
		return nil, err
	}
	if err := b.CheckTemplate(spec.Template); err != nil {
		return nil, err
	}
	digest, err := spec.Template.Digest()
	if err != nil {
		return nil, fmt.Errorf("local: template digest: %w", err)
	}
	if spec.TemplateID != "" && spec.TemplateID != digest.String() {
		return nil, fmt.Errorf("%w: TemplateID is %s but the image is %s", sandbox.ErrInvalidSpec, spec.TemplateID, digest)
	}
	runnerPath, err := b.runnerBinary(spec.Runner)
	if err != nil {
		return nil, err
	}
	t, err := b.template(ctx, spec.Template, digest)
	if err != nil {
		return nil, err
	}

	id := newID()
	b.mu.Lock()
	b.creating[id] = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.creating, id)
		b.mu.Unlock()
	}()
	s, err := b.start(ctx, id, spec, t, runnerPath, digest.String())
	if err != nil {
		// Nothing of a failed sandbox is left behind.
		if derr := b.Delete(context.WithoutCancel(ctx), id); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, fmt.Errorf("local: create sandbox %s: %w", id, err)
	}
	return s, nil
}

func validate(spec *sandbox.Spec) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", sandbox.ErrInvalidSpec, field, fmt.Sprintf(format, args...)))
	}
	if spec.Pool == "" {
		bad("Pool", "required")
	}
	if spec.Generation == "" {
		bad("Generation", "required")
	}
	if spec.Owner == "" {
		spec.Owner = sandbox.OwnerWarm
	}
	if len(spec.Owner) > maxOwner {
		bad("Owner", "%d bytes, over %d", len(spec.Owner), maxOwner)
	}
	if spec.Template == nil {
		bad("Template", "required")
	}
	if spec.Runner.Path == "" || !filepath.IsAbs(spec.Runner.Path) {
		bad("Runner.Path", "%q is not an absolute path", spec.Runner.Path)
	}
	switch spec.Network {
	case "", sandbox.NetworkDeny:
		if len(spec.Allow) > 0 {
			bad("Allow", "%d entries with network %q (an allow list needs %q)", len(spec.Allow), sandbox.NetworkDeny, sandbox.NetworkAllowList)
		}
	case sandbox.NetworkAllowList:
		if len(spec.Allow) == 0 {
			bad("Allow", "required with network %q", sandbox.NetworkAllowList)
		} else if _, err := egress.Parse(spec.Allow); err != nil {
			bad("Allow", "%v", err)
		}
	default:
		bad("Network", "%q: want %q or %q", spec.Network, sandbox.NetworkDeny, sandbox.NetworkAllowList)
	}
	for k := range spec.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad("Env", "name %q is empty or contains '=' or NUL", k)
		}
	}
	return errors.Join(errs...)
}

// start does the part of Create that leaves things to clean up.
func (b *Backend) start(ctx context.Context, id string, spec sandbox.Spec, t *tmpl, runnerPath, templateID string) (*sandbox.Sandbox, error) {
	dir := b.sandboxDir(id)
	if err := mkdirs(dir); err != nil {
		return nil, err
	}
	rec := &record{
		ID: id, Pool: spec.Pool, Generation: spec.Generation, Owner: spec.Owner,
		TemplateID: templateID, RunnerBinarySHA256: spec.Runner.Digest,
		Created: time.Now().UTC().Truncate(time.Millisecond), Workdir: t.workdir, BootID: b.boot,
		Network: spec.Network, Allow: spec.Allow, Shape: spec.Shape,
		// Said before they exist, in the one write: Delete removes a
		// cgroup and unmounts a workspace whether the record says so or
		// not, so a record that says so first leaves nothing behind, and
		// a bounded create waits for no more durable writes than another.
		WorkspaceBytes: spec.Limits.WorkspaceBytes,
		Cgroup:         cgroupLimits(spec.Limits) != (isolate.CgroupLimits{}),
	}
	if err := b.writeRecord(rec); err != nil {
		return nil, err
	}

	var cg *isolate.Cgroup
	if l := cgroupLimits(spec.Limits); l != (isolate.CgroupLimits{}) {
		var err error
		if cg, err = b.cgroups.New(id, l); err != nil {
			return nil, err
		}
	}
	// A bounded workspace is a tmpfs bubblewrap mounts in the sandbox's
	// own mount namespace, seeded once the runner answers (below); an
	// unbounded one a directory of the host, seeded now. A tmpfs mounted
	// on the host instead would take the host's mount table lock on every
	// create and delete: it serialised concurrent cold starts (B11).
	bounded := spec.Limits.WorkspaceBytes > 0
	ws := filepath.Join(dir, "workspace")
	if !bounded {
		if err := os.Mkdir(ws, 0o700); err != nil {
			return nil, err
		}
		if err := shape.SeedWorkspace(t.root, t.workdir, ws, t.user); err != nil {
			return nil, err
		}
	}
	refreshDir := filepath.Join(dir, "refresh")
	if err := mkdirs(refreshDir); err != nil {
		return nil, err
	}
	mounts, results, err := shape.Refresh(ctx, t.root, t.refresh, refreshDir)
	if err != nil {
		return nil, err
	}
	rec.Refresh = results
	mounts = append(mounts, isolate.Mount{Source: runnerPath, Target: sandbox.RunnerPath, ReadOnly: true})
	// /tmp, /dev/shm and the credential tmpfs are sized: their pages are
	// the sandbox's memory (sandbox.TmpBytes), never half the host's.
	tmp := sandbox.TmpBytes(spec.Limits)
	sized := []isolate.SizedTmpfs{
		{Target: "/tmp", Bytes: tmp, Mode: 0o777 | os.ModeSticky},
		{Target: "/dev/shm", Bytes: tmp},
		// The host writes the claim's credentials into it after start
		// (see PutCredential).
		{Target: sandbox.CredentialDir, Bytes: sandbox.CredentialTmpBytes},
	}
	if bounded {
		sized = append(sized, isolate.SizedTmpfs{Target: t.workdir, Bytes: spec.Limits.WorkspaceBytes, Mode: 0o700})
	} else {
		mounts = append(mounts, isolate.Mount{Source: ws, Target: t.workdir})
	}

	env := spec.Env
	waitEgress := func() error { return nil }
	argv := []string{sandbox.RunnerPath, "serve", "--listen-fd", "0",
		"--generation", spec.Generation, "--sandbox", id, "--workdir", t.workdir}
	if spec.Limits.NoFile > 0 {
		// The runner lowers its own limit, which every command inherits:
		// no privilege needed, whatever uid the sandbox runs as.
		argv = append(argv, "--nofile", strconv.FormatUint(spec.Limits.NoFile, 10))
	}
	if spec.Network == sandbox.NetworkAllowList {
		pol, err := egress.Parse(spec.Allow) // validate parsed it
		if err != nil {
			return nil, err
		}
		m, err := egressMount(dir)
		if err != nil {
			return nil, err
		}
		// The proxy's socket is made while bubblewrap starts (the runner
		// dials it per connection); Create returns once it listens.
		ready := make(chan error, 1)
		go func() { ready <- b.startEgress(id, m.Source, pol, t.user) }()
		waitEgress = func() error {
			err := <-ready
			waitEgress = func() error { return nil }
			return err
		}
		defer func() { _ = waitEgress() }() // a failed create's Delete finds the proxy to stop
		mounts = append(mounts, m)
		env = proxyEnv(env)
		argv = append(argv, "--egress-listen", sandbox.EgressProxyAddr, "--egress-socket", egressDir+"/"+egressSocket)
	}

	ln, err := listenUnix(b.socketPath(id))
	if err != nil {
		return nil, err
	}
	defer ln.Close() // the sandbox has its own copy once started
	is := isolateSpec(id, spec, t, mounts, sized, env, argv, ln, cg)
	is.UnsafeNoSeccomp = b.o.noSeccomp
	log := &tailBuffer{max: logTail}
	p, err := isolate.Start(context.Background(), is, log, log)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.procs[id] = p
	b.mu.Unlock()
	rec.Bwrap, _ = refOf(p.Pid())
	rec.Init, _ = refOf(p.SandboxPid())
	if err := b.writeRecord(rec); err != nil {
		return nil, err
	}

	client := runner.NewClient(dialUnix(b.socketPath(id)))
	if err := b.proveIdentity(ctx, p, log, client, rec); err != nil {
		return nil, err
	}
	if err := waitEgress(); err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	if bounded {
		// The runner is up, so bubblewrap has mounted everything; nothing
		// of the workload has run yet (it runs on a claim, after Create).
		if err := seedInSandbox(rec, t); err != nil {
			return nil, err
		}
	}
	rec.Ready = time.Now().UTC().Truncate(time.Millisecond)
	// Not under b.mu: the write waits for the disk, and List, SetOwner
	// and other Creates need b.mu meanwhile. The sandbox stays starting
	// until it is out of b.creating.
	if err := b.writeRecord(rec); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.creating, id)
	return b.view(rec), nil
}

// isolateSpec is how bubblewrap starts sandbox id's runner: the template's
// root read-only with mounts, the credential tmpfs, the sized workspace,
// the template's environment, the limits, and the listening socket ln as
// the runner's standard input.
func isolateSpec(id string, spec sandbox.Spec, t *tmpl, mounts []isolate.Mount, sized []isolate.SizedTmpfs, env map[string]string, argv []string, ln *os.File, cg *isolate.Cgroup) isolate.Spec {
	is := isolate.Spec{
		Root:         t.root,
		ReadOnlyRoot: true,
		Mounts:       mounts,
		Sized:        sized,
		Env:          shape.Env(t.env, t.workdir, env),
		Dir:          t.workdir,
		Hostname:     id,
		Argv:         argv,
		Stdin:        ln, // an *os.File: bwrap and the runner get the descriptor itself
		// NoFile is the runner's to set (see start).
		Limits: isolate.Limits{
			NProc: spec.Limits.NProc, AddressSpace: spec.Limits.AddressSpace,
			CPUSeconds: spec.Limits.CPUSeconds, FileSize: spec.Limits.FileSize,
		},
		Cgroup: cg,
	}
	if t.user != nil {
		if os.Geteuid() == 0 {
			is.HostUser = t.user // a real unprivileged uid, as the template's tests ran
		} else {
			is.User = t.user
		}
	}
	return is
}

// proveIdentity waits for the runner to answer and checks what it says
// against what was started, and, from the host, the binary the answering
// process runs.
func (b *Backend) proveIdentity(ctx context.Context, p *isolate.Process, log *tailBuffer, client *runner.Client, rec *record) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.readyTimeout)
	defer cancel()
	type answer struct {
		id  *runner.Identity
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		id, err := client.Identity(ctx)
		ch <- answer{id, err}
	}()
	var a answer
	ended := false
	select {
	case a = <-ch:
	case <-p.Done():
		ended = true
		cancel()
		a = <-ch
	}
	if a.err != nil && !ended {
		// A runner that died takes its listening socket with it; give
		// the Process a moment to say so.
		select {
		case <-p.Done():
			ended = true
		case <-time.After(time.Second):
		}
	}
	if ended && (a.err != nil || a.id == nil) {
		res, _ := p.Wait()
		return fmt.Errorf("the sandbox ended (exit %d) before its runner answered; output: %q", res.ExitCode, log.String())
	}
	if a.err != nil {
		return fmt.Errorf("the runner did not prove its identity (ready timeout %s): %w; output: %q", b.o.readyTimeout, a.err, log.String())
	}
	id := a.id
	var errs []error
	if id.RunnerBinarySHA256 != rec.RunnerBinarySHA256 {
		errs = append(errs, fmt.Errorf("%w: the runner says it is %s, the spec wants %s", sandbox.ErrIdentity, id.RunnerBinarySHA256, rec.RunnerBinarySHA256))
	}
	if id.Generation != rec.Generation {
		errs = append(errs, fmt.Errorf("%w: the runner says generation %q, the spec wants %q", sandbox.ErrIdentity, id.Generation, rec.Generation))
	}
	if id.SandboxID != rec.ID {
		errs = append(errs, fmt.Errorf("%w: the runner says sandbox %q, want %q", sandbox.ErrIdentity, id.SandboxID, rec.ID))
	}
	if errs != nil {
		return errors.Join(errs...)
	}
	// The runner's word is checked from the host: the process that answered
	// (by its pid inside the sandbox) runs a binary with the expected hash.
	hostPid, ok := findInSandbox(rec.Init.Pid, id.Pid)
	if !ok {
		return fmt.Errorf("%w: no process with pid %d in the sandbox", sandbox.ErrIdentity, id.Pid)
	}
	rec.Runner, _ = refOf(hostPid)
	got, err := b.exeDigest(fmt.Sprintf("/proc/%d/exe", hostPid))
	if err != nil {
		return fmt.Errorf("%w: read the runner's executable from the host: %w", sandbox.ErrIdentity, err)
	}
	if got != rec.RunnerBinarySHA256 {
		return fmt.Errorf("%w: the runner process runs %s, the spec wants %s", sandbox.ErrIdentity, got, rec.RunnerBinarySHA256)
	}
	return nil
}
