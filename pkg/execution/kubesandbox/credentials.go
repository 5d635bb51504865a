package kubesandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

var _ sandbox.Credentials = (*Backend)(nil)

// credentialTimeout bounds a credential's pod exec when its context has
// no deadline.
const credentialTimeout = 30 * time.Second

// PutCredential writes data as name in sandbox.CredentialDir of the pod
// id (the writable memory emptyDir package render mounts there for a
// generation that pins a secretVersion): a pod exec, in the workspace
// container, of `slipway-runner credential put NAME`, whose standard input
// carries data, never its arguments, environment or an error. The runner
// checks that the folder is a tmpfs and writes a temporary file of mode
// 0400 renamed over name; the exec runs as the container's user, so the
// file is the sandbox user's. ErrNotRunning when the pod is gone or not
// running.
func (b *Backend) PutCredential(ctx context.Context, id, name string, data []byte) error {
	if err := runner.CredentialName(name); err != nil {
		return fmt.Errorf("%w: %v", sandbox.ErrInvalidSpec, err)
	}
	if len(data) > runner.MaxCredentialSize {
		return fmt.Errorf("%w: credential %s of %d bytes: at most %d", sandbox.ErrInvalidSpec, name, len(data), runner.MaxCredentialSize)
	}
	if err := b.runningPod(ctx, id); err != nil {
		return err
	}
	return b.credentialExec(ctx, id, name, "put", data)
}

// RemoveCredential removes name from sandbox.CredentialDir of the pod id
// by a pod exec of `slipway-runner credential rm NAME`. A pod that is gone
// or not running has no memory emptyDir left: nothing to do.
func (b *Backend) RemoveCredential(ctx context.Context, id, name string) error {
	if err := runner.CredentialName(name); err != nil {
		return fmt.Errorf("%w: %v", sandbox.ErrInvalidSpec, err)
	}
	if err := b.runningPod(ctx, id); errors.Is(err, sandbox.ErrNotRunning) {
		return nil
	} else if err != nil {
		return err
	}
	err := b.credentialExec(ctx, id, name, "rm", nil)
	if err != nil && errors.Is(b.runningPod(context.WithoutCancel(ctx), id), sandbox.ErrNotRunning) {
		return nil // it went away meanwhile, and its emptyDir with it
	}
	return err
}

// runningPod is nil when pod id runs and is not being deleted, an error
// wrapping sandbox.ErrNotRunning when it is gone or does not run.
func (b *Backend) runningPod(ctx context.Context, id string) error {
	pod, err := b.dyn.Resource(podsGVR).Namespace(b.namespace).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: kube: pod %s/%s is gone", sandbox.ErrNotRunning, b.namespace, id)
	}
	if err != nil {
		return fmt.Errorf("kube: pod %s/%s: %w", b.namespace, id, err)
	}
	phase, _, _ := unstructured.NestedString(pod.Object, "status", "phase")
	if phase != "Running" || pod.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%w: kube: pod %s/%s is %s", sandbox.ErrNotRunning, b.namespace, id, strings.ToLower(phase))
	}
	return nil
}

// credentialExec runs `slipway-runner credential OP NAME` in the pod's
// workspace container with data as its standard input. Its error holds
// what the runner said on stderr (which names the file, never the data).
func (b *Backend) credentialExec(ctx context.Context, id, name, op string, data []byte) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, credentialTimeout)
		defer cancel()
	}
	exec, err := newExecutor(b.cfg, b.namespace, id, kubeobjects.WorkspaceContainer, []string{kubeobjects.RunnerBinary, "credential", op, name})
	if err != nil {
		return err
	}
	stdout, stderr := &capped{max: maxExecStderr}, &capped{max: maxExecStderr}
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: bytes.NewReader(data), Stdout: stdout, Stderr: stderr})
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return fmt.Errorf("kube: credential %s %s in pod %s/%s: %w", op, name, b.namespace, id, err)
	}
	return nil
}
