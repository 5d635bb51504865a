package scan

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func entry(p string, a ScrubAction, rule string) ScrubEntry {
	return ScrubEntry{Path: p, Action: a, Rule: rule}
}

func TestScrub(t *testing.T) {
	tok := fake(80, alnum, 36)
	x := file{content: "x\n"}
	root := plant(t, map[string]file{
		"/root/.bash_history":                                               x,
		"/root/.python_history":                                             x,
		"/root/.npmrc":                                                      {content: "//registry.npmjs.org/:_authToken=" + tok + "\n"},
		"/home/alice/.zsh_history":                                          x,
		"/home/alice/.ssh/id_ed25519":                                       {content: "key\n", mode: 0o600},
		"/home/alice/.ssh/id_ed25519.pub":                                   x,
		"/home/alice/.ssh/authorized_keys":                                  x,
		"/home/alice/.netrc":                                                x,
		"/home/alice/.git-credentials":                                      x,
		"/home/alice/.docker/config.json":                                   x,
		"/home/alice/.docker/buildx/instances":                              x,
		"/home/alice/.aws/credentials":                                      x,
		"/home/alice/.aws/config":                                           x,
		"/home/alice/.config/gcloud/credentials.db":                         x,
		"/home/alice/.config/gcloud/access_tokens.db":                       x,
		"/home/alice/.config/gcloud/application_default_credentials.json":   x,
		"/home/alice/.config/gcloud/legacy_credentials/a@b/adc.json":        x,
		"/home/alice/.config/gcloud/configurations/config_default":          x,
		"/home/alice/.azure/msal_token_cache.json":                          x,
		"/home/alice/.azure/azureProfile.json":                              x,
		"/home/alice/.kube/config":                                          x,
		"/home/alice/.kube/cache/discovery":                                 x,
		"/home/alice/.config/gh/hosts.yml":                                  x,
		"/home/alice/.npmrc":                                                {content: "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n"},
		"/home/alice/.cache/pip/wheel":                                      x,
		"/home/alice/.cache/tool/bin":                                       x,
		"/etc/ssh/ssh_host_rsa_key":                                         x,
		"/etc/ssh/ssh_host_rsa_key.pub":                                     x,
		"/etc/ssh/sshd_config":                                              x,
		"/etc/machine-id":                                                   {content: "0123456789abcdef0123456789abcdef\n", mode: 0o444},
		"/var/lib/dbus/machine-id":                                          x,
		"/var/lib/systemd/random-seed":                                      x,
		"/var/lib/apt/lists/lock":                                           {content: ""},
		"/var/lib/apt/lists/partial":                                        {mode: fs.ModeDir | 0o700},
		"/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease": x,
		"/var/cache/apt/pkgcache.bin":                                       x,
		"/var/cache/apt/srcpkgcache.bin":                                    x,
		"/var/cache/apt/archives/lock":                                      {content: ""},
		"/var/cache/apt/archives/curl.deb":                                  x,
		"/var/cache/apt/archives/partial/x.deb":                             x,
		"/tmp":                                                              {mode: fs.ModeDir | fs.ModeSticky | 0o777},
		"/tmp/build.log":                                                    x,
		"/tmp/.X11-unix/X0":                                                 x,
		"/tmp/cache/keep.me":                                                x,
		"/var/tmp/y":                                                        x,
		"/var/log/dpkg.log":                                                 {content: "2024-01-01 install curl\n", mode: 0o640},
		"/var/log/dpkg.log.1":                                               x,
		"/var/log/apt/history.log.2.gz":                                     x,
		"/var/log/apt/term.log":                                             {content: ""},
		"/var/log/journal/abc/system.journal":                               x,
		"/opt/build/a.log":                                                  x,
		"/opt/build/b.txt":                                                  x,
	})
	extra := []string{"/opt/build/*.log", "/home/alice/.cache"}
	keep := []string{"/tmp/cache", "/home/alice/.cache/tool"}
	rep, err := Scrub(root, extra, keep)
	if err != nil {
		t.Fatal(err)
	}
	R, E, K := ScrubRemoved, ScrubEmptied, ScrubKept
	want := []ScrubEntry{
		entry("/etc/machine-id", E, "machine-id"),
		entry("/etc/ssh/ssh_host_rsa_key", R, "ssh-host-key"),
		entry("/etc/ssh/ssh_host_rsa_key.pub", R, "ssh-host-key"),
		entry("/home/alice/.aws/config", R, "aws-credentials"),
		entry("/home/alice/.aws/credentials", R, "aws-credentials"),
		entry("/home/alice/.azure/msal_token_cache.json", R, "azure-credentials"),
		entry("/home/alice/.cache/pip", R, "extra"),
		entry("/home/alice/.cache/tool", K, "extra"),
		entry("/home/alice/.config/gcloud/access_tokens.db", R, "gcloud-credentials"),
		entry("/home/alice/.config/gcloud/application_default_credentials.json", R, "gcloud-credentials"),
		entry("/home/alice/.config/gcloud/credentials.db", R, "gcloud-credentials"),
		entry("/home/alice/.config/gcloud/legacy_credentials", R, "gcloud-credentials"),
		entry("/home/alice/.config/gh/hosts.yml", R, "gh-credentials"),
		entry("/home/alice/.docker/config.json", R, "docker-config"),
		entry("/home/alice/.git-credentials", R, "git-credentials"),
		entry("/home/alice/.kube/config", R, "kube-config"),
		entry("/home/alice/.netrc", R, "netrc"),
		entry("/home/alice/.ssh/id_ed25519", R, "ssh-private-key"),
		entry("/home/alice/.zsh_history", R, "shell-history"),
		entry("/opt/build/a.log", R, "extra"),
		entry("/root/.bash_history", R, "shell-history"),
		entry("/root/.npmrc", R, "npm-token"),
		entry("/root/.python_history", R, "shell-history"),
		entry("/tmp/.X11-unix", R, "tmp"),
		entry("/tmp/build.log", R, "tmp"),
		entry("/tmp/cache", K, "tmp"),
		entry("/var/cache/apt/archives/curl.deb", R, "apt-cache"),
		entry("/var/cache/apt/archives/partial/x.deb", R, "apt-cache"),
		entry("/var/cache/apt/pkgcache.bin", R, "apt-cache"),
		entry("/var/cache/apt/srcpkgcache.bin", R, "apt-cache"),
		entry("/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease", R, "apt-lists"),
		entry("/var/lib/dbus/machine-id", E, "machine-id"),
		entry("/var/lib/systemd/random-seed", R, "random-seed"),
		entry("/var/log/apt/history.log.2.gz", R, "log-rotated"),
		entry("/var/log/dpkg.log", E, "log-truncated"),
		entry("/var/log/dpkg.log.1", R, "log-rotated"),
		entry("/var/log/journal/abc/system.journal", R, "log-rotated"),
		entry("/var/tmp/y", R, "tmp"),
	}
	if !reflect.DeepEqual(rep.Entries, want) {
		t.Fatalf("entries:\n%v\nwant\n%v", rep.Entries, want)
	}
	for _, e := range want {
		_, err := os.Lstat(filepath.Join(root, e.Path))
		if gone := errors.Is(err, fs.ErrNotExist); gone != (e.Action == R) {
			t.Errorf("%s: exists=%v after %s", e.Path, !gone, e.Action)
		}
	}
	for p, mode := range map[string]fs.FileMode{
		"/tmp": fs.ModeDir | fs.ModeSticky | 0o777, "/var/tmp": fs.ModeDir | 0o755,
		"/etc/machine-id": 0o444, "/var/log/dpkg.log": 0o640, "/var/lib/apt/lists/lock": 0o644,
		"/var/lib/apt/lists/partial": fs.ModeDir | 0o700, "/var/cache/apt/archives/lock": 0o644,
		"/home/alice/.ssh/id_ed25519.pub": 0o644, "/home/alice/.npmrc": 0o644, "/tmp/cache/keep.me": 0o644,
		"/home/alice/.cache/tool/bin": 0o644, "/home/alice/.docker/buildx/instances": 0o644, "/opt/build/b.txt": 0o644,
		"/var/log/apt/term.log": 0o644, "/etc/ssh/sshd_config": 0o644,
	} {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v %v, want mode %v", p, fi.Mode(), err, mode)
		}
	}
	if fi, _ := os.Stat(filepath.Join(root, "etc/machine-id")); fi == nil || fi.Size() != 0 {
		t.Errorf("machine-id not emptied")
	}

	// Repeat-safe: nothing left to change, the keeps are still reported.
	again, err := Scrub(root, extra, keep)
	if err != nil {
		t.Fatal(err)
	}
	wantAgain := []ScrubEntry{entry("/home/alice/.cache/tool", K, "extra"), entry("/tmp/cache", K, "tmp")}
	if again.Changed() != 0 || !reflect.DeepEqual(again.Entries, wantAgain) {
		t.Errorf("second scrub: %v", again.Entries)
	}
	if rep.Changed() != len(want)-2 {
		t.Errorf("Changed() = %d", rep.Changed())
	}
}

// TestScrubSymlinks: symlinks in the rootfs that point at host files are
// removed themselves (or left, for files Scrub only empties), never followed.
func TestScrubSymlinks(t *testing.T) {
	host := t.TempDir()
	hostname := filepath.Join(host, "hostname")
	hist := filepath.Join(host, "home", ".bash_history")
	for _, p := range []string{hostname, hist} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("box\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := plant(t, map[string]file{
		"/root/.bash_history": {link: hostname},
		"/etc/machine-id":     {link: hostname},
		"/var/log/syslog":     {link: hostname},
		"/home/bob":           {link: filepath.Join(host, "home")},
		"/tmp/link":           {link: host},
		"/opt/cache":          {link: host},
		"/var/tmp":            {link: "../../../../../../../" + host},
	})
	rep, err := Scrub(root, []string{"/opt/cache/*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []ScrubEntry{
		entry("/home/bob", ScrubSkipped, "shell-history"),
		entry("/opt/cache", ScrubSkipped, "extra"),
		entry("/root/.bash_history", ScrubRemoved, "shell-history"),
		entry("/tmp/link", ScrubRemoved, "tmp"),
		entry("/var/tmp", ScrubSkipped, "tmp"),
	}
	if !reflect.DeepEqual(rep.Entries, want) {
		t.Fatalf("entries:\n%v\nwant\n%v", rep.Entries, want)
	}
	for _, p := range []string{hostname, hist} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "box\n" {
			t.Errorf("host file %s changed: %q %v", p, b, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "root/.bash_history")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("symlink not removed: %v", err)
	}
}

func TestScrubRefused(t *testing.T) {
	root := t.TempDir()
	for _, extra := range []string{"tmp/x", "/", "/a/**/b", "/a/../b", "/a/["} {
		if _, err := Scrub(root, []string{extra}, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("extra %q: %v, want ErrConfig", extra, err)
		}
	}
	if _, err := Scrub(root, nil, []string{"tmp/cache"}); !errors.Is(err, ErrConfig) {
		t.Errorf("relative keep: %v", err)
	}
	if _, err := Scrub(filepath.Join(root, "missing"), nil, nil); !errors.Is(err, ErrRootfs) {
		t.Errorf("missing root: %v", err)
	}
}
