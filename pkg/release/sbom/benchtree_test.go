package sbom

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/need"
)

// The B4 tree. Full: a Debian bookworm minbase made by debootstrap (cached, since it takes minutes)
// plus generated language packages and Go binaries. Smoke (BENCH_SMOKE=1): a fake dpkg database with
// 20 packages plus a few language packages, made in milliseconds. Names, versions and payloads come
// from a fixed seed; payload files are random bytes, hex-encoded.

const b4Seed = 4

// b4Tree makes the tree and says what it holds.
func b4Tree(b *testing.B) (root, what string) {
	b.Helper()
	root = filepath.Join(b.TempDir(), "rootfs")
	r := rand.New(rand.NewPCG(b4Seed, b4Seed))
	nPy, nNPM := 40, 80
	if os.Getenv("BENCH_SMOKE") != "" {
		nPy, nNPM = 5, 8
		writeFakeDpkg(b, root, r, 20)
		what = "smoke: fake dpkg database (20) + "
	} else {
		base := debianMinbase(b)
		if out, err := exec.Command("cp", "-a", base, root).CombinedOutput(); err != nil {
			b.Fatalf("copy %s: %v\n%s", base, err, out)
		}
		what = "debootstrap --variant=minbase bookworm + "
	}
	writeLanguagePackages(b, root, r, nPy, nNPM)
	bins := []string{buildTiny(b, b.TempDir())}
	if crane := craneBinary(); crane != "" && os.Getenv("BENCH_SMOKE") == "" {
		bins = append(bins, crane)
	}
	for _, bin := range bins {
		copyFile(b, bin, filepath.Join(root, "usr/local/bin", filepath.Base(bin)), 0o755)
	}
	what += fmt.Sprintf("%d python dist-info + %d npm packages (with package-lock.json) + Go binaries %v", nPy, nNPM, baseNames(bins))
	return root, what
}

func baseNames(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}

// craneBinary finds the crane the Makefile builds into bin/ (a Go binary with module information).
func craneBinary() string {
	for _, p := range []string{os.Getenv("CRANE"), filepath.Join("..", "..", "..", "bin", "crane")} {
		if fi, err := os.Stat(p); p != "" && err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

func benchCacheDir() string {
	if d := os.Getenv("SLIPWAY_BENCH_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "slipway-bench")
	}
	return filepath.Join(home, ".cache", "slipway-bench")
}

// debianMinbase returns the cached minbase tree, making it with debootstrap the first time. The
// tree is scrubbed as a template build would (no .deb files, no apt lists).
func debianMinbase(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(benchCacheDir(), "b4", "bookworm-minbase")
	if _, err := os.Stat(filepath.Join(dir, "var", "lib", "dpkg", "status")); err == nil {
		return dir
	}
	mirror := aptMirror()
	how := fmt.Sprintf("debootstrap --variant=minbase bookworm %s %s", dir, mirror)
	need.Binary(b, "debootstrap", "apt-get install -y debootstrap, or make the cached tree with: "+how)
	need.Root(b, "B4 full runs debootstrap, or make the cached tree with: "+how)
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		b.Fatal(err)
	}
	b.Logf("making the B4 base tree (minutes, cached afterwards): %s", how)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "bookworm", tmp, mirror).CombinedOutput()
	if err != nil {
		tail := out[max(0, len(out)-2000):]
		b.Fatalf("%s: %v\n%s", how, err, tail)
	}
	for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*"} {
		matches, _ := filepath.Glob(filepath.Join(tmp, glob))
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		b.Fatal(err)
	}
	return dir
}

// aptMirror returns the Debian mirror this machine's apt uses for bookworm, from deb822 .sources
// files or one-line .list files, else deb.debian.org.
func aptMirror() string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, para := range strings.Split(string(b), "\n\n") {
			fields := map[string][]string{}
			for _, line := range strings.Split(para, "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, " ") {
					fields[strings.ToLower(k)] = strings.Fields(v)
				}
			}
			if slices.Contains(fields["types"], "deb") && slices.Contains(fields["suites"], "bookworm") && len(fields["uris"]) > 0 {
				return fields["uris"][0]
			}
		}
	}
	lists, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	for _, f := range append([]string{"/etc/apt/sources.list"}, lists...) {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			w := strings.Fields(sc.Text())
			if len(w) > 2 && w[0] == "deb" {
				w = slices.DeleteFunc(w[1:], func(s string) bool { return strings.HasPrefix(s, "[") || strings.HasSuffix(s, "]") })
				if len(w) > 1 && w[1] == "bookworm" {
					fh.Close()
					return w[0]
				}
			}
		}
		fh.Close()
	}
	return "http://deb.debian.org/debian"
}

func word(r *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

func version(r *rand.Rand) string {
	return fmt.Sprintf("%d.%d.%d", r.IntN(10), r.IntN(30), r.IntN(50))
}

// payload is 1-16 KiB of random bytes, hex-encoded.
func payload(r *rand.Rand) string {
	raw := make([]byte, 512+r.IntN(8*1024))
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	return hex.EncodeToString(raw)
}

func writeTree(b *testing.B, root string, files map[string]string) {
	b.Helper()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func writeFakeDpkg(b *testing.B, root string, r *rand.Rand, n int) {
	var status strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&status, "Package: lib%s%d\nStatus: install ok installed\nPriority: optional\nSection: libs\n"+
			"Installed-Size: %d\nMaintainer: B4 <b4@example.invalid>\nArchitecture: amd64\nVersion: %s-%d\n"+
			"Description: generated package %d\n\n", word(r, 6), i, 10+r.IntN(5000), version(r), 1+r.IntN(3), i)
	}
	writeTree(b, root, map[string]string{
		"etc/os-release":      "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n",
		"var/lib/dpkg/status": status.String(),
	})
}

// writeLanguagePackages writes Python packages installed as dist-info under /usr/local/lib and an npm
// application under /opt/b4-app with its node_modules and package-lock.json (the lock is what the
// syft CLI's directory catalogers read; installed package.json files are what an image scan reads).
func writeLanguagePackages(b *testing.B, root string, r *rand.Rand, nPy, nNPM int) {
	files := map[string]string{}
	site := "usr/local/lib/python3.11/dist-packages/"
	for i := 0; i < nPy; i++ {
		name, ver := fmt.Sprintf("b4_%s%d", word(r, 5), i), version(r)
		info := fmt.Sprintf("%s%s-%s.dist-info/", site, name, ver)
		files[info+"METADATA"] = fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: generated\nLicense: MIT\n", name, ver)
		files[info+"top_level.txt"] = name + "\n"
		files[info+"RECORD"] = fmt.Sprintf("%s/__init__.py,,\n%sMETADATA,,\n", name, info[len(site):])
		files[site+name+"/__init__.py"] = "DATA = '" + payload(r) + "'\n"
	}
	app := "opt/b4-app/"
	deps := map[string]string{}
	lock := map[string]any{"": map[string]any{"name": "b4-app", "version": "1.0.0"}}
	for i := 0; i < nNPM; i++ {
		name, ver := fmt.Sprintf("b4-%s%d", word(r, 5), i), version(r)
		if i%10 == 0 {
			name = "@b4/" + name
		}
		deps[name] = "^" + ver
		lock["node_modules/"+name] = map[string]any{
			"version":  ver,
			"resolved": fmt.Sprintf("https://registry.npmjs.org/%s/-/%s-%s.tgz", name, filepath.Base(name), ver),
			"license":  "MIT",
		}
		pj, _ := json.Marshal(map[string]any{"name": name, "version": ver, "license": "MIT", "main": "index.js"})
		files[app+"node_modules/"+name+"/package.json"] = string(pj) + "\n"
		files[app+"node_modules/"+name+"/index.js"] = "module.exports = '" + payload(r) + "';\n"
	}
	pj, _ := json.Marshal(map[string]any{"name": "b4-app", "version": "1.0.0", "private": true, "dependencies": deps})
	files[app+"package.json"] = string(pj) + "\n"
	lj, _ := json.Marshal(map[string]any{"name": "b4-app", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": lock})
	files[app+"package-lock.json"] = string(lj) + "\n"
	writeTree(b, root, files)
}

// treeStats counts regular files and their bytes, reading each once so that neither timed tool
// starts with a cold page cache.
func treeStats(b *testing.B, root string) (files int, size int64) {
	b.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		size += int64(len(body))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return files, size
}
