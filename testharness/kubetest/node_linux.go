package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const nodeLockDir = "/run/lock"

// NodeStartTimeout bounds how long StartNode waits for the node to be
// Ready, unless the context's deadline is sooner.
const NodeStartTimeout = 3 * time.Minute

// NodeLockTimeout bounds how long StartNode waits for another test's node
// to be closed (the packages of `go test ./...` run at once).
const NodeLockTimeout = 10 * time.Minute

var nodeGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// Node is a kubelet with Debian's containerd and runc and a CNI bridge,
// registered with the cluster under the host's name. Close (or the
// cluster's Close) stops it.
type Node struct {
	name       string
	dir        string
	sock       string   // containerd's socket
	lock       *os.File // the node lock, when the node took it (not WithServices)
	containerd *proc
	kubelet    *proc
	proxy      *proc // kube-proxy, WithServices
	proxyBin   string
	closeOnce  sync.Once
}

// StartNode starts a node for the cluster, pulling images (and the pause
// image, which it builds from the pause binary of `make kube-bins` and
// pushes to registry/kubetest/pause) from registry, a plain-HTTP registry
// at host:port on this machine. It first waits for the machine's node lock
// (at most NodeLockTimeout) while another test has a node, and returns
// once the Node is Ready and schedulable. Its containerd has its own root,
// state and socket under the cluster's directory; the cluster's Close
// stops the node before the API server.
func (c *Cluster) StartNode(ctx context.Context, registry string) (*Node, error) {
	if c.node != nil {
		return nil, errors.New("kubetest: the cluster has a node already")
	}
	bins, err := nodeBinaries()
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("kubetest: host name: %w", err)
	}
	n := &Node{name: strings.ToLower(host), dir: filepath.Join(c.dir, "node")}
	n.sock = filepath.Join(n.dir, "containerd", "containerd.sock")
	if c.lock == nil { // else the cluster holds it since Start (WithServices)
		lockCtx, cancelLock := context.WithTimeout(ctx, NodeLockTimeout)
		n.lock, err = lockNode(lockCtx)
		cancelLock()
		if err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, NodeStartTimeout)
	defer cancel()
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()
	if n.lock != nil {
		// The pods and bridge of a node whose test binary died: nobody
		// else uses them while the lock is held (WithServices, Start did
		// this before making the bridge).
		killOrphanShims()
		if err := cleanupOrphanProxy(ctx, filepath.Join(c.dir, "logs", "kube-proxy-cleanup.log")); err != nil {
			return nil, err
		}
		deleteBridge()
	}
	pause, err := pushPause(ctx, bins["pause"], registry)
	if err != nil {
		return nil, err
	}
	if err := n.writeContainerdConfig(registry, pause, c.opts.services); err != nil {
		return nil, err
	}
	n.containerd, err = startProc("containerd", bins["containerd"], filepath.Join(c.dir, "logs", "containerd.log"),
		"--config", filepath.Join(n.dir, "containerd", "config.toml"))
	if err != nil {
		return nil, err
	}
	err = waitFor(ctx, n.containerd, "containerd socket", func(context.Context) bool {
		conn, err := net.DialTimeout("unix", n.sock, time.Second)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
	if err != nil {
		return nil, err
	}
	if err := n.writeKubeletConfig(c, host); err != nil {
		return nil, err
	}
	n.kubelet, err = startProc("kubelet", bins["kubelet"], filepath.Join(c.dir, "logs", "kubelet.log"),
		"--config="+filepath.Join(n.dir, "kubelet", "config.yaml"),
		"--kubeconfig="+filepath.Join(n.dir, "kubelet", "kubeconfig"),
		"--root-dir="+filepath.Join(n.dir, "kubelet", "root"),
		"--cert-dir="+filepath.Join(n.dir, "kubelet", "pki"),
		"--v=1")
	if err != nil {
		return nil, err
	}
	dyn, err := c.Dynamic()
	if err != nil {
		return nil, err
	}
	err = waitFor(ctx, n.kubelet, "node "+n.name+" Ready", func(ctx context.Context) bool {
		node, err := dyn.Resource(nodeGVR).Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(node.Object, "status", "conditions")
		for _, cnd := range conds {
			if m, ok := cnd.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("%w; containerd log ends:\n%s", err, n.containerd.tail(2000))
	}
	if err := untaintReady(ctx, c, n.name); err != nil {
		return nil, err
	}
	if c.opts.services {
		if err := n.startProxy(ctx, c); err != nil {
			return nil, err
		}
	}
	c.node = n
	ok = true
	return n, nil
}

// nodeParts are the binaries a node runs.
var nodeParts = []string{"kubelet", "pause", "containerd", "containerd-shim-runc-v2", "runc",
	CNIBinDir + "/bridge", CNIBinDir + "/host-local", CNIBinDir + "/loopback"}

// CheckNode says why StartNode cannot run here (nil when it can): a part
// not installed or built (matching ErrNotBuilt, naming what to run), or
// not root. Tests skip with its message.
func CheckNode() error {
	if _, err := nodeBinaries(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("kubetest: a node (containerd, kubelet, a network bridge) needs root")
	}
	return nil
}

func nodeBinaries() (map[string]string, error) {
	bins := map[string]string{}
	for _, name := range nodeParts {
		p, err := Binary(name)
		if err != nil {
			return nil, err
		}
		bins[name] = p
	}
	return bins, nil
}

// untaintReady removes the node.kubernetes.io/not-ready taint the kubelet
// registers its Node with, as the node lifecycle controller of a
// kube-controller-manager (not run here) does once the Node is Ready, so
// that kube-scheduler places pods on it.
func untaintReady(ctx context.Context, c *Cluster, node string) error {
	dyn, err := c.Dynamic()
	if err != nil {
		return err
	}
	return poll(ctx, func() (bool, error) {
		u, err := dyn.Resource(nodeGVR).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		taints, _, _ := unstructured.NestedSlice(u.Object, "spec", "taints")
		kept := []any{}
		for _, t := range taints {
			if m, ok := t.(map[string]any); ok && m["key"] == "node.kubernetes.io/not-ready" {
				continue
			}
			kept = append(kept, t)
		}
		if len(kept) == len(taints) {
			return true, nil
		}
		if err := unstructured.SetNestedSlice(u.Object, kept, "spec", "taints"); err != nil {
			return false, err
		}
		_, err = dyn.Resource(nodeGVR).Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// Name is the Node's name: the host's name.
func (n *Node) Name() string { return n.name }

// lockNode takes the machine's node lock (the bridge and PodCIDR are the
// machine's), waiting while another test holds it.
func lockNode(ctx context.Context) (*os.File, error) {
	dir := nodeLockDir
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = os.TempDir()
	}
	f, err := os.OpenFile(filepath.Join(dir, "kubetest-node.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kubetest: node lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("kubetest: node lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("kubetest: node lock %s held by another test: %w", f.Name(), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close stops the node by process id: the kubelet, then every pod's
// processes and containerd's shims, then containerd; it unmounts what they
// mounted under the node's directory, deletes the bridge and releases the
// node lock. It is safe to call more than once.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		n.stopProxy()
		if n.kubelet != nil {
			n.kubelet.kill()
		}
		killShims(n.sock)
		if n.containerd != nil {
			n.containerd.kill()
		}
		unmountUnder(n.dir)
		removeLogLinks(n.dir)
		if n.lock != nil { // else the cluster's Close does both
			deleteBridge()
			n.lock.Close()
		}
	})
}

// killShims kills containerd's shims serving socket (they leave
// containerd's process group) and every process under them (pause and the
// containers' processes), and waits until they are gone.
func killShims(socket string) {
	killShimsWhere(func(address string) bool { return address == socket })
}

// killOrphanShims kills the shims, and the pods under them, of a node
// whose test binary died (its kubelet and containerd died with it, by the
// parent-death signal; the shims and pods did not): shims of a kubetest
// containerd socket that nothing serves any more. Called with the node
// lock held, so no other node is starting or running.
func killOrphanShims() {
	killShimsWhere(func(address string) bool {
		if !strings.HasSuffix(address, "/node/containerd/containerd.sock") {
			return false
		}
		conn, err := net.DialTimeout("unix", address, time.Second)
		if err == nil {
			conn.Close()
			return false
		}
		return true
	})
}

// killShimsWhere kills the shims whose -address argument match accepts,
// and everything under them.
func killShimsWhere(match func(address string) bool) {
	procs := processes()
	var shims []int
	for pid, p := range procs {
		if !strings.Contains(p.cmdline, "containerd-shim") {
			continue
		}
		for i, a := range p.args {
			if a == "-address" && i+1 < len(p.args) && match(p.args[i+1]) {
				shims = append(shims, pid)
				break
			}
		}
	}
	var victims []int
	for _, s := range shims {
		victims = append(victims, descendants(procs, s)...)
	}
	victims = append(victims, shims...)
	for _, pid := range victims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range victims {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

type procInfo struct {
	ppid    int
	cmdline string
	args    []string
}

// processes reads every process's parent and command line from /proc.
func processes() map[int]procInfo {
	out := map[int]procInfo{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = procInfo{ppid: ppid, cmdline: string(cmd), args: strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")}
	}
	return out
}

// descendants lists the processes under pid, deepest first.
func descendants(procs map[int]procInfo, pid int) []int {
	var out []int
	for child, p := range procs {
		if p.ppid == pid {
			out = append(out, descendants(procs, child)...)
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// unmountUnder lazily unmounts every mount point under dir, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeLogLinks removes the kubelet's links in /var/log/containers (a
// fixed path) that point into dir.
func removeLogLinks(dir string) {
	const links = "/var/log/containers"
	entries, _ := os.ReadDir(links)
	for _, e := range entries {
		p := filepath.Join(links, e.Name())
		if t, err := os.Readlink(p); err == nil && strings.HasPrefix(t, dir+"/") {
			_ = os.Remove(p)
		}
	}
}

// deleteBridge deletes the node's bridge, if present.
func deleteBridge() {
	if _, err := net.InterfaceByName(BridgeName); err != nil {
		return
	}
	_ = exec.Command("ip", "link", "delete", BridgeName).Run()
}

// procs are the node's processes, for logs.
func (n *Node) procs() []*proc { return []*proc{n.containerd, n.kubelet, n.proxy} }
