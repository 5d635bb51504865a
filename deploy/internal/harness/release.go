//go:build linux

package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/selfrelease"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/incluster"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// SnapshotRelease is a snapshot release of this tree for the host's
// platform (incluster.SnapshotRelease: a clean tree's kept in the user's
// cache by commit, a dirty tree's built for this test only).
// $SLIPWAY_RELEASE names a release built earlier instead (make release
// SNAPSHOT=1 RELEASE_OUT=DIR), whose size the test logs. It returns the
// release's directory and how it came to be (built, reused, given).
func SnapshotRelease(t testing.TB) (string, string) {
	t.Helper()
	if dir := os.Getenv("SLIPWAY_RELEASE"); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "checksums.txt"))
		if err != nil {
			t.Fatalf("SLIPWAY_RELEASE=%s is not a release: %v", dir, err)
		}
		t.Logf("the release of SLIPWAY_RELEASE=%s (checksums.txt: %d lines), not one of this tree", dir, strings.Count(string(b), "\n"))
		return dir, "given by SLIPWAY_RELEASE"
	}
	rel, err := incluster.SnapshotRelease(context.Background(), Root(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return rel.Dir, rel.How
}

// PreviousRelease is a snapshot release of the previous version
// (tools/previous-version's commit: the build make skew puts beside this
// tree's), built by that commit's own slipway from a clone of this
// repository checked out at it, and kept in the user's cache folder by
// commit as SnapshotRelease keeps this tree's (in a folder of its own, so
// a release of this tree never replaces it). It returns the release's
// directory, how it came to be and the commit.
func PreviousRelease(t testing.TB) (string, string, string) {
	t.Helper()
	commit := PreviousVersion(t)
	rel, err := incluster.KeptRelease("incluster-release-previous", commit, func(out string) error {
		src := filepath.Join(t.TempDir(), "src")
		for _, args := range [][]string{
			{"clone", "-q", "--shared", "--no-checkout", Root(t), src},
			{"-C", src, "checkout", "-q", "--detach", commit},
		} {
			if b, err := exec.Command("git", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, b)
			}
		}
		return incluster.BuildRelease(context.Background(), src, t.TempDir(), out)
	})
	if err != nil {
		t.Fatal(err)
	}
	return rel.Dir, rel.How, commit
}

// PreviousVersion is the commit tools/previous-version names, which this
// clone must hold.
func PreviousVersion(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), "tools", "previous-version"))
	if err != nil {
		t.Fatal(err)
	}
	var commit string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			commit = l
			break
		}
	}
	if err := exec.Command("git", "-C", Root(t), "cat-file", "-e", commit+"^{commit}").Run(); commit == "" || err != nil {
		t.Fatalf("tools/previous-version names %q, which this clone does not have (a shallow clone? fetch its history): %v", commit, err)
	}
	return commit
}

// Publish pushes the release in dir to repository (signed with a key made
// for the test) and returns each program's image by digest, as the
// registry holds it, the verification policy of what it pushed and the
// key that signed it.
func Publish(t testing.TB, dir, repository string) (map[string]string, []byte, signature.SignerVerifier) {
	t.Helper()
	priv, pub, err := sign.GenerateKeys([]byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	return PublishSigned(t, dir, repository, sv), selfrelease.Policy(pub, repository, selfrelease.Programs), sv
}

// PublishSigned pushes the release in dir to repository, signed with sv,
// and returns each program's image by digest, as the registry holds it
// (incluster.Publish).
func PublishSigned(t testing.TB, dir, repository string, sv signature.SignerVerifier) map[string]string {
	t.Helper()
	images, err := incluster.Publish(context.Background(), dir, repository, sv)
	if err != nil {
		t.Fatal(err)
	}
	return images
}

// Apply server-side applies objs in order, as kubectl apply does
// (incluster.Apply).
func Apply(t testing.TB, cfg *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	if err := incluster.Apply(context.Background(), cfg, objs); err != nil {
		t.Fatal(err)
	}
}

// ByDigest is a reference by digest.
var ByDigest = regexp.MustCompile(`^[a-z0-9.:/_-]+@sha256:[0-9a-f]{64}$`)

var DeploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// WaitReady waits (at most 3 minutes: a loaded machine) until Deployment
// name has replicas Ready pods; when it does not, it shows the pods' state
// and the containers' logs (incluster.WaitReady).
func WaitReady(t testing.TB, c *kubetest.Cluster, name string, replicas int64) {
	t.Helper()
	if err := incluster.WaitReady(context.Background(), clientset(t, c), name, int32(replicas), 3*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// PodsState is the status and log of app name's pods, for a failure
// (incluster.PodsState).
func PodsState(t testing.TB, c *kubetest.Cluster, name string) string {
	return incluster.PodsState(context.Background(), clientset(t, c), name)
}

// clientset is a client of c's API server.
func clientset(t testing.TB, c *kubetest.Cluster) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
