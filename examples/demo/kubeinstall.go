package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/incluster"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// kubeParts are the binaries the Kubernetes part needs besides the API
// server and etcd: a node, its scheduler, agent-sandbox's controller, and
// what routes Services (kube-proxy, kube-controller-manager, iptables),
// for the in-cluster planes' Services.
var kubeParts = []string{"kubelet", "kube-scheduler", "agent-sandbox-controller", "kube-proxy", "kube-controller-manager", "iptables"}

// runtimeTokenValue is the runtime's API token: Secret
// slipway-runtime-token's, and the demo's runtime.token file for the CLI.
const runtimeTokenValue = "demo-runtime-token-0123456789"

// planes is Slipway installed in the demo's cluster: the release it came
// from, its images by digest, the host's PostgreSQL and the git server
// that serves config.git to the pods, and the Services' URLs from the host.
type planes struct {
	rel              incluster.Release
	images           map[string]string
	pg               *pgtest.Server
	git              *gittest.Server
	runtime, control string // http://<cluster IP>:<port>
	tokenFile        string // the runtime's token, for the CLI
}

// dsn is the host's URL of the planes' database (no password: the CLI's
// --db takes it in argv).
func (p *planes) dsn() string { return p.pg.DSN("slipway") }

// startCluster starts the node that routes Services (it takes the
// machine's node lock: it waits while a test's node holds it), the
// demo's registry on the node's bridge (pods and the host reach it), the
// node, its scheduler and agent-sandbox's controller.
func startCluster(ctx context.Context, d *demo) (*kubetest.Cluster, string, error) {
	section("cluster", "a real single-node cluster on this machine (package kubetest), routing Services")
	fmt.Printf("  etcd (Debian), kube-apiserver %s, kube-controller-manager, kubelet %s with containerd and runc (Debian),\n", kubetest.KubeVersion, kubetest.KubeVersion)
	fmt.Printf("  kube-proxy (iptables), a CNI bridge %s (%s), kube-scheduler, agent-sandbox's controller %s with its CRDs\n", kubetest.BridgeName, kubetest.PodGateway, kubetest.AgentSandboxVersion)
	fmt.Printf("  (one node runs on a machine at a time: this waits while a test's node holds the lock)\n")
	c, err := kubetest.Start(ctx, filepath.Join(d.work, "cluster"), kubetest.WithServices())
	if err != nil {
		return nil, "", err
	}
	d.closers = append(d.closers, c.Close)
	// The registry is on the bridge: the node pulls from it, and the
	// runtime's pod verifies the images it grants against it.
	if err := d.startRegistry(kubetest.PodGateway); err != nil {
		return nil, "", err
	}
	node, err := c.StartNode(ctx, d.host)
	if err != nil {
		return nil, "", err
	}
	if err := c.StartScheduler(ctx); err != nil {
		return nil, "", err
	}
	if err := c.StartSandboxController(ctx); err != nil {
		return nil, "", err
	}
	return c, node.Name(), nil
}

// publishRelease is Slipway's snapshot release of this tree (kept by
// commit in the user's cache and shared with package deploy's tests, or
// built for this run when the tree is dirty; $SLIPWAY_DEMO_RELEASE names
// one built earlier instead, as for make demo), pushed to the demo's
// registry by digest, signed with the demo's key and attested, and
// verified against the demo's policy.
func publishRelease(ctx context.Context, d *demo, repoRoot string) (incluster.Release, map[string]string, error) {
	section("release", "Slipway's snapshot release of this tree (slipway release --snapshot), its images pushed by digest, signed and attested")
	t0 := time.Now()
	rel := incluster.Release{Dir: os.Getenv("SLIPWAY_DEMO_RELEASE"), How: "given by $SLIPWAY_DEMO_RELEASE, not built from this tree"}
	var err error
	if rel.Dir == "" {
		if rel, err = incluster.SnapshotRelease(ctx, repoRoot, d.work); err != nil {
			return rel, nil, err
		}
	}
	fmt.Printf("  release %s (%s)\n", rel.How, time.Since(t0).Round(100*time.Millisecond))
	key, err := os.ReadFile(filepath.Join(d.work, "policies", "release.key"))
	if err != nil {
		return rel, nil, err
	}
	sv, err := sign.LoadSigner(key, []byte(os.Getenv("COSIGN_PASSWORD")))
	if err != nil {
		return rel, nil, fmt.Errorf("the demo's key policies/release.key: %w", err)
	}
	images, err := incluster.Publish(ctx, rel.Dir, d.host+"/"+releaseRepo, sv)
	if err != nil {
		return rel, nil, err
	}
	for _, p := range []string{"slipway", "slipway-runner"} {
		fmt.Printf("  %-15s %s\n", p, images[p])
	}
	section("verify", "the released image against the demo's policy: signed, SLSA provenance from slipway release's builder, SBOM (exit 0)")
	if err := d.sh.run(0, "verify", images["slipway"], "--policy", filepath.Join("policies", "verification.yaml"), "--kind", "control-plane"); err != nil {
		return rel, nil, err
	}
	return rel, images, nil
}

// install installs overlays/single (one replica of each plane) with the
// release's image on the host's PostgreSQL, config.git served over HTTP
// on the bridge, and shows what an operator sees once both planes are
// Ready.
func install(ctx context.Context, d *demo, c *kubetest.Cluster, rel incluster.Release, images map[string]string) (*planes, error) {
	section("install", "Slipway's planes into the node, as docs/install-kubernetes.md does it: overlays/single, the release's image pinned by digest")
	p := &planes{rel: rel, images: images, tokenFile: filepath.Join(d.work, "runtime.token")}
	// PostgreSQL's folder must be enterable by the user it runs as (the
	// demo's work folder is not).
	pgDir, err := os.MkdirTemp("", "slipway-demo-pg-")
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() { os.RemoveAll(pgDir) })
	if p.pg, err = pgtest.Start(ctx, pgDir, pgtest.ListenAlso(kubetest.PodGateway, kubetest.PodCIDR)); err != nil {
		return nil, err
	}
	d.closers = append(d.closers, p.pg.Close)
	if err := p.pg.CreateDatabase(ctx, "slipway"); err != nil {
		return nil, err
	}
	fmt.Printf("  database: the host's PostgreSQL, database slipway, reached by pods at %s:%d\n", kubetest.PodGateway, p.pg.Port())
	if p.git, err = gittest.Serve(d.work, gittest.ListenAlso(kubetest.PodGateway)); err != nil {
		return nil, err
	}
	d.closers = append(d.closers, p.git.Close)
	fmt.Printf("  config repository: config.git served over HTTP (git http-backend) at %s\n", p.git.URLAlso("config.git"))
	if err := os.WriteFile(p.tokenFile, []byte(runtimeTokenValue+"\n"), 0o600); err != nil {
		return nil, err
	}
	settings := map[string]string{"repo": p.git.URLAlso("config.git"), "branch": "main", "pool": "agents"}
	objs, err := incluster.Objects(filepath.Join(filepath.Dir(filepath.Dir(d.here)), "deploy"), "single", images["slipway"], settings)
	if err != nil {
		return nil, err
	}
	fmt.Printf("$ kubectl create secret generic slipway-db -n slipway-system --from-file=dsn=...       (the database's URL)\n")
	fmt.Printf("$ kubectl create secret generic slipway-runtime-token -n slipway-system --from-file=token=runtime.token\n")
	fmt.Printf("$ kubectl create secret generic slipway-git -n slipway-system --from-literal=token=   (config.git needs none)\n")
	fmt.Printf("$ kubectl apply --server-side -k my-overlay   (overlays/single; images: slipway@%s; settings repo=%s branch=main pool=agents)\n",
		short(images["slipway"]), settings["repo"])
	secrets := map[string]map[string]string{
		incluster.SecretDB:           {"dsn": p.pg.DSNAlso("slipway")},
		incluster.SecretRuntimeToken: {"token": runtimeTokenValue},
		incluster.SecretGit:          {"token": ""},
	}
	ordered := incluster.Ordered(objs, secrets)
	if err := incluster.Apply(ctx, c.Config(), ordered); err != nil {
		return nil, err
	}
	for _, o := range ordered {
		fmt.Printf("  %s/%s applied\n", strings.ToLower(o.GetKind()), o.GetName())
	}
	return p, p.ready(ctx, c)
}

// ready waits until both planes' Deployments are Ready, shows their pods
// and finds their Services from the host.
func (p *planes) ready(ctx context.Context, c *kubetest.Cluster) error {
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return err
	}
	t0 := time.Now()
	for _, dep := range incluster.Deployments {
		if err := incluster.WaitReady(ctx, cs, dep, 1, 4*time.Minute); err != nil {
			return err
		}
	}
	fmt.Printf("  both Deployments Ready %s after the apply (the kubelet's probes of /readyz: database, config repository, cluster)\n", time.Since(t0).Round(100*time.Millisecond))
	if err := showPlanes(ctx, cs); err != nil {
		return err
	}
	if p.runtime, err = incluster.ServiceURL(ctx, cs, "slipway-runtime"); err != nil {
		return err
	}
	if p.control, err = incluster.ServiceURL(ctx, cs, "slipway-control"); err != nil {
		return err
	}
	fmt.Printf("  Services from the host (kube-proxy's rules): slipway-runtime %s, slipway-control %s\n", p.runtime, p.control)
	return nil
}

// showPlanes lists Slipway's pods as `kubectl get pods -n slipway-system`
// would, with the image each container runs and the image id the kubelet
// reports (both by digest).
func showPlanes(ctx context.Context, cs kubernetes.Interface) error {
	l, err := cs.CoreV1().Pods(incluster.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("$ kubectl get pods -n %s -o wide\n", incluster.Namespace)
	fmt.Printf("  %-36s %-8s %-8s %s\n", "NAME", "READY", "STATUS", "IMAGE (as the kubelet runs it)")
	var rows []string
	for _, pod := range l.Items {
		if pod.DeletionTimestamp != nil {
			continue
		}
		ready, image := 0, ""
		for _, st := range pod.Status.ContainerStatuses {
			if st.Ready {
				ready++
			}
			image = st.ImageID
		}
		rows = append(rows, fmt.Sprintf("  %-36s %d/%-6d %-8s %s", pod.Name, ready, len(pod.Spec.Containers), pod.Status.Phase, image))
	}
	sort.Strings(rows)
	fmt.Println(strings.Join(rows, "\n"))
	return nil
}

// planesLogs is the state of both planes' pods and the last lines of
// their logs, for a failure after the install.
func planesLogs(ctx context.Context, c *kubetest.Cluster) string {
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, dep := range incluster.Deployments {
		st := strings.Split(incluster.PodsState(ctx, cs, dep), "\n")
		if len(st) > 400 {
			st = st[len(st)-400:]
		}
		fmt.Fprintf(&b, "\n== %s: its pods and the end of their logs\n%s\n", dep, strings.Join(st, "\n"))
	}
	return b.String()
}
