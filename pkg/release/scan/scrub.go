package scan

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"syscall"
)

// ScrubAction says what Scrub did to a path.
type ScrubAction string

const (
	// ScrubRemoved: the path (file, symlink or whole directory) was removed.
	ScrubRemoved ScrubAction = "removed"
	// ScrubEmptied: the regular file was truncated to zero bytes, keeping it
	// and its mode (machine-id, live logs).
	ScrubEmptied ScrubAction = "emptied"
	// ScrubKept: the path matched a rule but lies under a keep path.
	ScrubKept ScrubAction = "kept"
	// ScrubSkipped: a rule's pattern led through this symlink, which Scrub
	// never follows.
	ScrubSkipped ScrubAction = "skipped"
)

// ScrubEntry is one path Scrub acted on, with the rule that matched it.
type ScrubEntry struct {
	Path   string      `json:"path"`
	Action ScrubAction `json:"action"`
	Rule   string      `json:"rule"`
}

// ScrubReport lists, sorted by path, what Scrub removed, emptied, kept and
// skipped. A second Scrub of the same tree removes and empties nothing.
type ScrubReport struct {
	Entries []ScrubEntry `json:"entries"`
}

// Changed counts the entries that changed the tree (removed or emptied).
func (r *ScrubReport) Changed() int {
	n := 0
	for _, e := range r.Entries {
		if e.Action == ScrubRemoved || e.Action == ScrubEmptied {
			n++
		}
	}
	return n
}

// scrubRule is one line of the built-in list. A pattern starting with "~/"
// applies in every home (/root and /home/*). A final "**" element matches
// everything below the directory. filter, when set, picks among the matches.
type scrubRule struct {
	name    string
	action  ScrubAction
	pattern string
	filter  func(r *os.Root, rel string, info fs.FileInfo) (bool, error)
}

func homeRules(name string, rels ...string) []scrubRule {
	out := make([]scrubRule, len(rels))
	for i, rel := range rels {
		out[i] = scrubRule{name: name, action: ScrubRemoved, pattern: "~/" + rel}
	}
	return out
}

func sysRules(name string, action ScrubAction, pats ...string) []scrubRule {
	out := make([]scrubRule, len(pats))
	for i, p := range pats {
		out[i] = scrubRule{name: name, action: action, pattern: p}
	}
	return out
}

// builtinScrub is the built-in scrub list; doc.go has it as a table.
func builtinScrub() []scrubRule {
	rules := slices.Concat(
		homeRules("shell-history", ".bash_history", ".zsh_history", ".ash_history", ".sh_history",
			".python_history", ".node_repl_history", ".lesshst", ".viminfo", ".mysql_history", ".psql_history"),
		homeRules("netrc", ".netrc"),
		homeRules("git-credentials", ".git-credentials"),
		homeRules("docker-config", ".docker/config.json", ".config/containers/auth.json"),
		homeRules("aws-credentials", ".aws/credentials", ".aws/config"),
		homeRules("gcloud-credentials", ".config/gcloud/credentials.db", ".config/gcloud/access_tokens.db",
			".config/gcloud/application_default_credentials.json", ".config/gcloud/legacy_credentials"),
		homeRules("azure-credentials", ".azure/accessTokens.json", ".azure/msal_token_cache.*",
			".azure/service_principal_entries.*"),
		homeRules("kube-config", ".kube/config"),
		homeRules("gh-credentials", ".config/gh/hosts.yml"),
		[]scrubRule{
			{name: "npm-token", action: ScrubRemoved, pattern: "~/.npmrc", filter: npmrcHasToken},
			{name: "ssh-private-key", action: ScrubRemoved, pattern: "~/.ssh/id_*", filter: notPub},
			{name: "apt-lists", action: ScrubRemoved, pattern: "/var/lib/apt/lists/*", filter: notAptLock},
			{name: "log-rotated", action: ScrubRemoved, pattern: "/var/log/**", filter: rotatedLog(true)},
			{name: "log-truncated", action: ScrubEmptied, pattern: "/var/log/**", filter: rotatedLog(false)},
		},
		sysRules("ssh-host-key", ScrubRemoved, "/etc/ssh/ssh_host_*"),
		sysRules("machine-id", ScrubEmptied, "/etc/machine-id", "/var/lib/dbus/machine-id"),
		sysRules("random-seed", ScrubRemoved, "/var/lib/systemd/random-seed", "/var/lib/urandom/random-seed"),
		sysRules("apt-cache", ScrubRemoved, "/var/cache/apt/*.bin", "/var/cache/apt/archives/*.deb",
			"/var/cache/apt/archives/partial/*"),
		sysRules("tmp", ScrubRemoved, "/tmp/*", "/var/tmp/*"),
	)
	var out []scrubRule
	for _, r := range rules {
		if rel, ok := strings.CutPrefix(r.pattern, "~/"); ok {
			a, b := r, r
			a.pattern, b.pattern = "/root/"+rel, "/home/*/"+rel
			out = append(out, a, b)
			continue
		}
		out = append(out, r)
	}
	return out
}

func notPub(_ *os.Root, rel string, _ fs.FileInfo) (bool, error) {
	return !strings.HasSuffix(rel, ".pub"), nil
}

func notAptLock(_ *os.Root, rel string, _ fs.FileInfo) (bool, error) {
	b := path.Base(rel)
	return b != "lock" && b != "partial", nil
}

// reRotated matches rotated, compressed and journal log files.
var reRotated = regexp.MustCompile(`(?:\.[0-9]+|\.old|\.gz|\.xz|\.bz2|\.zst|\.lz4|-[0-9]{8}|\.journal~?)$`)

// rotatedLog selects the rotated regular files (want true) or the live ones.
func rotatedLog(want bool) func(*os.Root, string, fs.FileInfo) (bool, error) {
	return func(_ *os.Root, rel string, info fs.FileInfo) (bool, error) {
		return info.Mode().IsRegular() && reRotated.MatchString(path.Base(rel)) == want, nil
	}
}

// npmrcHasToken selects a regular .npmrc holding an _authToken, _auth or
// _password with a literal value; ${NPM_TOKEN} references are no secret, so
// such a file stays (RuleHighEntropy still scans every .npmrc).
func npmrcHasToken(r *os.Root, rel string, info fs.FileInfo) (bool, error) {
	if !info.Mode().IsRegular() {
		return false, nil
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || strings.HasPrefix(k, "#") || strings.HasPrefix(k, ";") {
			continue
		}
		if strings.HasSuffix(k, "_authtoken") || strings.HasSuffix(k, "_auth") || strings.HasSuffix(k, "_password") {
			if v := strings.Trim(strings.TrimSpace(v), `"'`); !placeholder(v) {
				return true, nil
			}
		}
	}
	return false, nil // a line too long for the scanner ends the look; the scan still reads it
}

// Scrub removes build credentials and transient files from the rootfs at
// root: the built-in list (see doc.go) plus extra, absolute paths or globs
// of the template's scrub list (rule "extra"). Nothing at or below a keep
// path (absolute, no globs: the template's allowed caches) is removed; a
// directory holding a keep path is emptied around it. Paths resolve inside
// root through an os.Root and symlinks are never followed: a symlink that
// matches is removed itself, and a pattern leading through a symlinked
// directory is reported as skipped. On error the report so far comes back
// with it.
func Scrub(root string, extra []string, keep []string) (*ScrubReport, error) {
	rules := builtinScrub()
	for _, p := range extra {
		if err := validGlob("scrub", p); err != nil {
			return nil, err
		}
		if p == "/" || strings.Contains(strings.TrimSuffix(p, "/**"), "**") {
			return nil, fmt.Errorf("%w: scrub %q: not the root, and ** only as the last element", ErrConfig, p)
		}
		rules = append(rules, scrubRule{name: "extra", action: ScrubRemoved, pattern: p})
	}
	for _, k := range keep {
		if !strings.HasPrefix(k, "/") || path.Clean(k) != k {
			return nil, fmt.Errorf("%w: keep %q must be absolute and clean", ErrConfig, k)
		}
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	defer r.Close()
	s := &scrubber{root: r, keep: keep, skipped: map[string]bool{}}

	var cands []match
	for _, rule := range rules {
		ms, err := s.expand(rule)
		if err != nil {
			return s.report(), err
		}
		cands = append(cands, ms...)
	}
	// One entry per path, the first rule in list order winning; parents first.
	slices.SortStableFunc(cands, func(a, b match) int { return cmp.Compare(a.abs, b.abs) })
	cands = slices.CompactFunc(cands, func(a, b match) bool { return a.abs == b.abs })
	var gone []string
	for _, c := range cands {
		if slices.ContainsFunc(gone, func(g string) bool { return under(c.abs, g) }) {
			continue
		}
		if err := s.apply(c); err != nil {
			return s.report(), err
		}
		if c.rule.action == ScrubRemoved {
			gone = append(gone, c.abs)
		}
	}
	return s.report(), nil
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
