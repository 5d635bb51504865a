//go:build linux

package badinput_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/deploy/internal/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// Bad input on the installed pods (overlays/single on a real node), one
// cause after another on one install: (a) Secret slipway-db missing, (b)
// its DSN naming a database port where nothing answers, (c) a config
// repository that refuses the token of Secret slipway-git, (d) the
// runtime's Role without one verb. For each, every pod it touches is not
// Ready, runs on without a restart (restartCount 0 through a window: no
// crash loop) and its log has exactly one line naming the cause (the
// Secret and key, the host and port, the repository, the verb) with the
// reason, no stack trace and no secret value; then the cause is fixed and
// the same pod becomes Ready without a restart. (d) alone needs a new pod:
// a runtime checks its verbs at start and again only while one is missing,
// so the pod is deleted after the Role loses the verb; its successor is
// not Ready until the Role is fixed, and then is, without a restart.
func TestInClusterBadInput(t *testing.T) {
	e := harness.Start(t, false)
	ctx := context.Background()
	e.Git.Seed(t, "config.git", "main", map[string]string{"policies/verification.yaml": string(e.Policy)})
	const (
		gitToken    = "incluster-git-token-right-0123456789"
		wrongToken  = "incluster-git-token-wrong-9876543210"
		badPassword = "incluster-db-password-never-shown"
	)
	e.Git.RequireToken(gitToken)
	repoURL := e.Git.URLAlso("config.git")
	never := []string{harness.RuntimeToken, gitToken, wrongToken, badPassword}
	planes := []string{"slipway-control", "slipway-runtime"}

	// (a) no Secret slipway-db: the pods start (the volume is optional)
	// and wait for the file, naming the Secret and its key.
	e.ApplyPlanes(t, "single", map[string]string{"repo": repoURL, "branch": "main", "pool": "default"}, map[string]map[string]string{
		"slipway-runtime-token": {"token": harness.RuntimeToken},
		"slipway-git":           {"token": gitToken},
	})
	pods := map[string]string{}
	for _, app := range planes {
		pods[app] = notReadyFor(t, e, app, "", []string{"Secret slipway-db, key dsn", "does not exist"}, never)
	}
	e.Mark("(a) Secret slipway-db missing: both not Ready, named")

	// (b) the Secret names a database port where nothing listens: each
	// process takes the file the kubelet writes and names the host.
	dead := deadAddr(t)
	putSecret(t, e, "slipway-db", map[string]string{"dsn": "postgres://slipway:" + badPassword + "@" + dead + "/slipway?sslmode=disable"})
	for _, app := range planes {
		notReadyFor(t, e, app, pods[app], []string{dead, "connection refused"}, never)
	}
	e.Mark("(b) a database that does not answer: both not Ready, named")
	putSecret(t, e, "slipway-db", map[string]string{"dsn": e.PG.DSNAlso("slipway")})
	for _, app := range planes {
		readyAgain(t, e, app, pods[app])
	}
	e.Mark("(a, b) fixed: both Ready, not restarted")

	// (c) the repository refuses the token: the next fetch reads the file
	// the kubelet rewrote.
	putSecret(t, e, "slipway-git", map[string]string{"token": wrongToken})
	for _, app := range planes {
		notReadyFor(t, e, app, pods[app], []string{repoURL, "authentication required"}, never)
	}
	e.Mark("(c) the repository refuses the token: both not Ready, named")
	putSecret(t, e, "slipway-git", map[string]string{"token": gitToken})
	for _, app := range planes {
		readyAgain(t, e, app, pods[app])
	}
	e.Mark("(c) fixed: both Ready, not restarted")

	// (d) the runtime's Role without watch on sandboxclaims.
	roles := e.CS.RbacV1().Roles("slipway-sandboxes")
	role, err := roles.Get(ctx, "slipway-runtime", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full := role.DeepCopy()
	cut := false
	for i, r := range role.Rules {
		if slices.Contains(r.Resources, "sandboxclaims") && slices.Contains(r.Verbs, "watch") {
			role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "watch" })
			cut = true
		}
	}
	if !cut {
		t.Fatalf("Role slipway-runtime has no watch on sandboxclaims to remove: %v", role.Rules)
	}
	if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.CS.CoreV1().Pods("slipway-system").Delete(ctx, pods["slipway-runtime"], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rt := notReadyFor(t, e, "slipway-runtime", "", []string{"may not watch sandboxclaims.extensions.agents.x-k8s.io in namespace slipway-sandboxes"}, never)
	if rt == pods["slipway-runtime"] {
		t.Fatalf("the runtime's pod %s was not replaced", rt)
	}
	e.Mark("(d) a verb removed: the new runtime pod not Ready, the verb named")
	role, err = roles.Get(ctx, "slipway-runtime", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules = full.Rules
	if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyAgain(t, e, "slipway-runtime", rt)
	e.Mark("(d) fixed: Ready, not restarted")
	t.Logf("%s", strings.Join(e.Timings, ", "))
}

// badWindow is how long a pod must stay not Ready, unrestarted, after its
// cause is logged.
const badWindow = 20 * time.Second

// notReadyFor waits (at most 4 minutes: the kubelet writes a changed
// Secret's files at its next sync of the pod, up to a minute or so) until
// app's pod (pod, or the one not being deleted when "") has a log line
// holding every string of cause, then until the pod is not Ready, and
// holds it not Ready with restartCount 0 through badWindow. Its log must
// then have exactly one line with the cause, no stack trace and none of
// never. It returns the pod's name.
func notReadyFor(t testing.TB, e *harness.Env, app, pod string, cause, never []string) string {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(4 * time.Minute)
	var p *corev1.Pod
	lines := func() []string {
		b, err := e.CS.CoreV1().Pods("slipway-system").GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return nil // the container has not started yet
		}
		var out []string
		for l := range strings.SplitSeq(string(b), "\n") {
			if holdsAll(l, cause) {
				out = append(out, l)
			}
		}
		return out
	}
	for {
		p = podOf(t, e, app, pod)
		if p != nil && len(lines()) > 0 && !podReady(p) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no pod not Ready with a log line naming %q after 4m:\n%s", app, cause, harness.PodsState(t, e.C, app))
		}
		time.Sleep(time.Second)
	}
	for end := time.Now().Add(badWindow); time.Now().Before(end); time.Sleep(2 * time.Second) {
		q := podOf(t, e, app, p.Name)
		if q == nil || podReady(q) || restarts(q) != 0 {
			t.Fatalf("%s: pod %s within %s of logging %q: gone, Ready or restarted:\n%s", app, p.Name, badWindow, cause, harness.PodsState(t, e.C, app))
		}
	}
	b, err := e.CS.CoreV1().Pods("slipway-system").GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	if ls := lines(); len(ls) != 1 {
		t.Errorf("%s: pod %s's log has %d lines naming %q, want 1:\n%s", app, p.Name, len(ls), cause, log)
	} else {
		t.Logf("%s: pod %s not Ready, not restarted; its line: %s", app, p.Name, ls[0])
	}
	for _, bad := range []string{"goroutine ", "panic:"} {
		if strings.Contains(log, bad) {
			t.Errorf("%s: pod %s's log has a stack trace (%q):\n%s", app, p.Name, bad, log)
		}
	}
	for _, s := range never {
		if strings.Contains(log, s) {
			t.Errorf("%s: pod %s's log shows a secret value:\n%s", app, p.Name, log)
		}
	}
	return p.Name
}

// readyAgain waits (at most 4 minutes) until app's pod is Ready, and
// checks it is still pod, never restarted.
func readyAgain(t testing.TB, e *harness.Env, app, pod string) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		p := podOf(t, e, app, pod)
		if p == nil {
			t.Fatalf("%s: pod %s is gone:\n%s", app, pod, harness.PodsState(t, e.C, app))
		}
		if n := restarts(p); n != 0 {
			t.Fatalf("%s: pod %s restarted %d times:\n%s", app, pod, n, harness.PodsState(t, e.C, app))
		}
		if podReady(p) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: pod %s not Ready 4m after the fix:\n%s", app, pod, harness.PodsState(t, e.C, app))
		}
		time.Sleep(time.Second)
	}
}

// podOf is app's pod named name, or when name is "" its one pod not being
// deleted; nil when there is none (yet).
func podOf(t testing.TB, e *harness.Env, app, name string) *corev1.Pod {
	t.Helper()
	pods, err := e.CS.CoreV1().Pods("slipway-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var live []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if name != "" && p.Name == name {
			return p
		}
		if name == "" && p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) > 1 {
		t.Fatalf("%s has %d pods, want one", app, len(live))
	}
	if len(live) == 1 {
		return live[0]
	}
	return nil
}

// putSecret creates or replaces Secret name in slipway-system.
func putSecret(t testing.TB, e *harness.Env, name string, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "slipway-system"}, StringData: data}
	secrets := e.CS.CoreV1().Secrets("slipway-system")
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old.Data, old.StringData = nil, data
		if _, err := secrets.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

func holdsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// deadAddr is host:port on the node's bridge where nothing listens: a
// pod's connection there is refused.
func deadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", kubetest.PodGateway+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
