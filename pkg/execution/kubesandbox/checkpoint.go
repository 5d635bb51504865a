package kubesandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// Checkpoints on Kubernetes are delete and restore: a suspend copies the
// workspace out of the pod (WorkspaceTar) into the runtime's checkpoint,
// then deletes the claim, its Sandbox and its pod; a resume claims a new
// sandbox of the same or a newer compatible generation (a fresh warm
// member: its init container has run the refresh phase) and writes the
// workspace back (RestoreTar). agent-sandbox's suspended mode (a Sandbox's
// spec.replicas 0) is not used: it deletes the pod and keeps the Sandbox,
// so it keeps only what a volumeClaimTemplate holds, and the rendered
// workspace is an emptyDir (a PersistentVolume per warm member would tie
// every member to storage and a node); the Sandbox it keeps is bound to
// its generation's template, so it cannot resume on a newer generation; and
// its capacity is not free while the Sandbox and its claim stay. A
// checkpoint, being an artifact, is signed, attested and verified before
// any restore, on any node.
var _ sandbox.WorkspaceStreamer = (*Backend)(nil)

// stopTimeout bounds how long Freeze waits for the pod to say its
// workload is stopped (the runner gives up sooner on a process that does
// not stop); thawTimeout how long a thaw waits for it to say the workload
// goes on.
const (
	stopTimeout = 3 * time.Minute
	thawTimeout = 30 * time.Second
)

// Freeze holds the workload of pod id still for a checkpoint's copy: a pod
// exec of `slipway-runner workspace stop` sends SIGSTOP to every process
// of the workspace container but the runner's own (the one serving the
// protocol, the connections' bridges, the copy), waits until each is
// stopped, and holds them while the exec's standard input stays open;
// thaw closes it and the processes get SIGCONT. What is not frozen: the
// runner's processes (a command the runner is starting when the stop
// comes is stopped in the next round), the pod's other containers (the
// egress proxy: they do not write the workspace), and what the kernel
// completes of a system call in progress. Unlike the local backend's
// cgroup freezer, a stopped process's parent may see it stop and go on
// (SIGCHLD). If the runtime goes away, the exec's stdin ends and the
// workload goes on; the runner also lets it go after 10 minutes.
func (b *Backend) Freeze(ctx context.Context, id string) (func() error, error) {
	if err := b.runningPod(ctx, id); err != nil {
		return nil, err
	}
	exec, err := newExecutor(b.cfg, b.namespace, id, kubeobjects.WorkspaceContainer, []string{kubeobjects.RunnerBinary, "workspace", "stop"})
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &capped{max: maxExecStderr}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: stderr})
		_ = outW.CloseWithError(io.EOF)
		_ = inR.Close()
		done <- err
	}()
	out := bufio.NewReader(outR)
	type line struct {
		s   string
		err error
	}
	first := make(chan line, 1)
	go func() { s, err := out.ReadString('\n'); first <- line{s, err} }()
	fail := func(err error) (func() error, error) {
		_ = inW.Close()
		select {
		case <-done:
		case <-time.After(thawTimeout):
		}
		cancel()
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return nil, fmt.Errorf("kube: stop the workload of pod %s/%s: %w", b.namespace, id, err)
	}
	var l line
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case l = <-first:
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-t.C:
		return fail(fmt.Errorf("no answer in %s", stopTimeout))
	}
	if l.err != nil || !strings.HasPrefix(l.s, "stopped ") {
		err := l.err
		if err == nil {
			err = fmt.Errorf("the runner said %q", strings.TrimSpace(l.s))
		}
		return fail(err)
	}
	return func() error {
		defer cancel()
		_ = inW.Close()
		rest := make(chan string, 1)
		go func() { b, _ := io.ReadAll(out); rest <- string(b) }()
		t := time.NewTimer(thawTimeout)
		defer t.Stop()
		var err error
		select {
		case err = <-done:
		case <-t.C:
			return fmt.Errorf("kube: continue the workload of pod %s/%s: no answer in %s", b.namespace, id, thawTimeout)
		}
		said := strings.TrimSpace(<-rest)
		if err == nil && !strings.HasPrefix(said, "continued ") {
			err = fmt.Errorf("the runner said %q", said)
		}
		if err != nil {
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				err = fmt.Errorf("%w: %s", err, msg)
			}
			return fmt.Errorf("kube: continue the workload of pod %s/%s: %w", b.namespace, id, err)
		}
		return nil
	}, nil
}

// WorkspaceTar writes the workspace of pod id (kubeobjects.WorkspaceVolumeDir)
// to w as a tar stream: a pod exec of `slipway-runner workspace tar`. Only
// the workspace volume: the credentials' memory emptyDir and the projected
// Secret are other mounts, outside it, and a symbolic link to them is
// copied as a link.
func (b *Backend) WorkspaceTar(ctx context.Context, id string, w io.Writer) error {
	if err := b.runningPod(ctx, id); err != nil {
		return err
	}
	return b.workspaceExec(ctx, id, "tar", strings.NewReader(""), w)
}

// RestoreTar empties the workspace of pod id and unpacks r into it: a pod
// exec of `slipway-runner workspace restore`, which refuses an absolute
// name, "..", a write through a symbolic link, a device and a hard link,
// naming the entry.
func (b *Backend) RestoreTar(ctx context.Context, id string, r io.Reader) error {
	if err := b.runningPod(ctx, id); err != nil {
		return err
	}
	return b.workspaceExec(ctx, id, "restore", r, &capped{max: maxExecStderr})
}

// workspaceExec runs `slipway-runner workspace OP WorkspaceVolumeDir` in
// the pod's workspace container.
func (b *Backend) workspaceExec(ctx context.Context, id, op string, stdin io.Reader, stdout io.Writer) error {
	exec, err := newExecutor(b.cfg, b.namespace, id, kubeobjects.WorkspaceContainer,
		[]string{kubeobjects.RunnerBinary, "workspace", op, kubeobjects.WorkspaceVolumeDir})
	if err != nil {
		return err
	}
	stderr := &capped{max: maxExecStderr}
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return fmt.Errorf("kube: workspace %s in pod %s/%s: %w", op, b.namespace, id, err)
	}
	return nil
}
