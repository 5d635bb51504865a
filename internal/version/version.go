package version

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by a release build; see the package comment.
var (
	version string
	commit  string
	dirty   string
)

// Info is what a program reports about its own build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Dirty     bool   `json:"dirty"`
	Untagged  bool   `json:"untagged"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	Module    string `json:"module,omitempty"`
}

// Get reports the running program's build.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return from(version, commit, dirty, bi)
}

// releaseTag is a release version: vMAJOR.MINOR.PATCH with an optional
// pre-release (v1.2.3-rc.1). v0.0.0-… (pseudo-versions, untagged builds)
// is not one.
var releaseTag = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// IsRelease says whether v names a release (a tag vX.Y.Z[-pre]) rather than
// an untagged build.
func IsRelease(v string) bool {
	return releaseTag.MatchString(v) && !strings.HasPrefix(v, "v0.0.0-")
}

// Untagged is the version of an untagged build of commit: v0.0.0-<commit12>,
// with -dirty when the tree had changes.
func Untagged(commit string, dirty bool) string {
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown"
	}
	v := "v0.0.0-" + commit
	if dirty {
		v += "-dirty"
	}
	return v
}

// from is Get with its inputs given: the link-time values and the build info.
func from(ver, com, dty string, bi *debug.BuildInfo) Info {
	in := Info{Version: ver, Commit: com, Dirty: dty == "true", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		in.Module = bi.Main.Path
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		if in.Commit == "" {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					in.Commit = s.Value
				case "vcs.modified":
					in.Dirty = s.Value == "true"
				}
			}
		}
		// go install module@vX.Y.Z: the module version is the tag.
		if in.Version == "" && IsRelease(bi.Main.Version) {
			in.Version = bi.Main.Version
		}
	}
	if in.Version == "" {
		in.Version = Untagged(in.Commit, in.Dirty)
	}
	in.Untagged = !IsRelease(in.Version)
	return in
}

// String is the one line a program prints for "version":
// "v1.2.3 (commit abc…, go1.26.8, linux/amd64)", with "untagged" and
// "dirty" said when they hold.
func (in Info) String() string {
	var notes []string
	if in.Untagged {
		notes = append(notes, "untagged")
	}
	if in.Commit != "" {
		notes = append(notes, "commit "+in.Commit)
	}
	if in.Dirty {
		notes = append(notes, "dirty")
	}
	notes = append(notes, in.GoVersion, in.Platform)
	return fmt.Sprintf("%s (%s)", in.Version, strings.Join(notes, ", "))
}
