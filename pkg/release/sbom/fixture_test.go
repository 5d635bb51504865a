package sbom

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/sbomdoc"
	"github.com/slipway-dev/slipway/testharness/need"
)

// fixtureFiles is a small root filesystem: a Debian os-release and dpkg database, a Python package
// installed as dist-info, two npm packages in a global node_modules and a busybox binary.
func fixtureFiles() map[string]string {
	return map[string]string{
		"etc/os-release": `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
`,
		"var/lib/dpkg/status": `Package: libssl3
Status: install ok installed
Priority: optional
Section: libs
Installed-Size: 6000
Maintainer: Debian OpenSSL Team <pkg-openssl-devel@alioth-lists.debian.net>
Architecture: amd64
Multi-Arch: same
Source: openssl
Version: 3.0.7-1
Depends: libc6 (>= 2.34)
Description: Secure Sockets Layer toolkit - shared libraries

Package: libc6
Status: install ok installed
Priority: optional
Section: libs
Installed-Size: 12000
Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>
Architecture: amd64
Multi-Arch: same
Source: glibc
Version: 2.36-9+deb12u4
Description: GNU C Library: Shared libraries

Package: openssl
Status: install ok installed
Priority: optional
Section: utils
Installed-Size: 2000
Maintainer: Debian OpenSSL Team <pkg-openssl-devel@alioth-lists.debian.net>
Architecture: amd64
Version: 3.0.7-1
Depends: libc6 (>= 2.34), libssl3 (>= 3.0.7)
Description: Secure Sockets Layer toolkit - cryptographic utility

`,
		"usr/share/doc/openssl/copyright": `Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Files: *
License: Apache-2.0
`,
		"usr/lib/python3/dist-packages/requests-2.31.0.dist-info/METADATA": `Metadata-Version: 2.1
Name: requests
Version: 2.31.0
Summary: Python HTTP for Humans.
License: Apache 2.0
`,
		"usr/lib/python3/dist-packages/requests-2.31.0.dist-info/top_level.txt": "requests\n",
		"usr/lib/node_modules/left-pad/package.json": `{"name": "left-pad", "version": "1.3.0", "license": "WTFPL"}
`,
		// a tool copied in outside the package manager, as the binary classifier knows it
		"opt/tools/bin/busybox": "\x7fELF\x00BusyBox v1.36.1 (2023-01-01 00:00:00 UTC) multi-call binary.\x00",
		"usr/lib/node_modules/@scope/tool/package.json": `{"name": "@scope/tool", "version": "0.2.0", "license": "MIT"}
`,
	}
}

// writeFixture writes fixtureFiles under a new temporary directory and returns it.
func writeFixture(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range fixtureFiles() {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// buildTiny builds testdata/tiny, a Go program with one dependency module, once per test binary
// run into dir, and returns the binary's path. It skips the test when the go tool is missing.
func buildTiny(t testing.TB, dir string) string {
	t.Helper()
	goTool := need.Binary(t, "go", "the Go binary fixture is built with it")
	out := filepath.Join(dir, "tiny")
	cmd := exec.Command(goTool, "build", "-trimpath", "-buildvcs=false", "-o", out, "./testdata/tiny")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOPROXY=off", "GOWORK=off", "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build testdata/tiny: %v\n%s", err, b)
	}
	return out
}

// copyFile copies src to dst with mode, creating dst's directory.
func copyFile(t testing.TB, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// packageLines renders packages one a line, "type name version purl", with the Go toolchain's
// version replaced by GOVERSION so a golden file survives toolchain updates.
func packageLines(pkgs []sbomdoc.Package, goVersion string) string {
	var b strings.Builder
	for _, p := range pkgs {
		line := strings.Join([]string{p.Type, p.Name, p.Version, p.PURL}, " ")
		if goVersion != "" {
			line = strings.ReplaceAll(line, goVersion, "GOVERSION")
			line = strings.ReplaceAll(line, strings.TrimPrefix(goVersion, "go"), "GOVERSION")
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
