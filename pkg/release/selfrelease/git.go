package selfrelease

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// source is the state of the tree a release is built from.
type source struct {
	commit string
	epoch  time.Time // the commit's time
	dirty  []string  // files with uncommitted changes (git status --porcelain)
	tags   []string  // release tags at HEAD
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func readSource(ctx context.Context, dir string) (*source, error) {
	head, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	ct, err := git(ctx, dir, "log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return nil, err
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(ct), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("commit time %q: %w", ct, err)
	}
	st, err := git(ctx, dir, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return nil, err
	}
	s := &source{commit: strings.TrimSpace(head), epoch: time.Unix(sec, 0).UTC()}
	for _, l := range strings.Split(st, "\n") {
		if len(l) > 3 {
			s.dirty = append(s.dirty, l[3:])
		}
	}
	tags, err := git(ctx, dir, "tag", "--points-at", "HEAD", "--list", "v[0-9]*")
	if err != nil {
		return nil, err
	}
	s.tags = strings.Fields(tags)
	return s, nil
}
