package version

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFrom(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/slipway-dev/slipway", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name              string
		ver, com, dty     string
		bi                *debug.BuildInfo
		want              string
		untagged, isDirty bool
		commit            string
	}{
		{name: "release stamp wins over vcs", ver: "v1.2.3", com: sha, dty: "false", bi: vcs("ffff", "true"), want: "v1.2.3", commit: sha},
		{name: "untagged clean", bi: vcs(sha, "false"), want: "v0.0.0-0123456789ab", untagged: true, commit: sha},
		{name: "untagged dirty", bi: vcs(sha, "true"), want: "v0.0.0-0123456789ab-dirty", untagged: true, isDirty: true, commit: sha},
		{name: "snapshot stamp", ver: "v0.0.0-0123456789ab", com: sha, dty: "false", want: "v0.0.0-0123456789ab", untagged: true, commit: sha},
		{name: "go install at a tag", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.1"}}, want: "v0.4.1"},
		{name: "pseudo-version module is untagged", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261206091000-0123456789ab"}}, want: "v0.0.0-unknown", untagged: true},
		{name: "nothing known", want: "v0.0.0-unknown", untagged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := from(tc.ver, tc.com, tc.dty, tc.bi)
			if in.Version != tc.want || in.Untagged != tc.untagged || in.Dirty != tc.isDirty || in.Commit != tc.commit {
				t.Fatalf("got %+v, want version %s untagged %v dirty %v commit %q", in, tc.want, tc.untagged, tc.isDirty, tc.commit)
			}
			s := in.String()
			if strings.Contains(s, "untagged") != tc.untagged || strings.Contains(s, "dirty") != tc.isDirty {
				t.Fatalf("String() = %q", s)
			}
		})
	}
}

func TestIsRelease(t *testing.T) {
	for v, want := range map[string]bool{
		"v1.2.3": true, "v0.4.0": true, "v1.0.0-rc.1": true,
		"v0.0.0-abc": false, "1.2.3": false, "v1.2": false, "v01.2.3": false, "devel": false, "": false,
	} {
		if got := IsRelease(v); got != want {
			t.Errorf("IsRelease(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestLinkStamp builds a program with the release flags and reads back what
// it reports: the -X names in the package comment are the real ones.
func TestLinkStamp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "v")
	const pkg = "github.com/slipway-dev/slipway/internal/version"
	ld := "-X " + pkg + ".version=v9.8.7 -X " + pkg + ".commit=cafe -X " + pkg + ".dirty=true"
	out, err := exec.Command("go", "build", "-trimpath", "-ldflags", ld, "-o", bin, "./testdata/stamp").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), "v9.8.7 (commit cafe, dirty, go") {
		t.Fatalf("stamped build says %q", got)
	}
}
