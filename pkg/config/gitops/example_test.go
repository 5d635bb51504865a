package gitops_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
)

func Example() {
	// A bare repository on disk (any git remote works the same way).
	dir, _ := os.MkdirTemp("", "gitops-example-")
	defer os.RemoveAll(dir)
	remote := filepath.Join(dir, "config.git")
	if err := exec.Command("git", "init", "--quiet", "--bare", "--initial-branch=main", remote).Run(); err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	repo, err := gitops.Open(ctx, remote)
	if err != nil {
		fmt.Println(err)
		return
	}
	edit := func(t *gitops.Tree) (*gitops.Commit, error) {
		if err := t.WriteFile("pools/agents/pool.yaml", []byte("kind: Pool\n")); err != nil {
			return nil, err
		}
		return &gitops.Commit{
			Subject:  "agents: create the pool",
			Trailers: []gitops.Trailer{{Key: "Slipway-Pool", Value: "agents"}},
		}, nil
	}
	for range 2 {
		res, err := repo.Update(ctx, gitops.Request{Branch: "main", Edit: edit,
			Author: gitops.Signature{Name: "Release Bot", Email: "bot@example.invalid"}})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Status, res.Changed)
	}
	out, _ := exec.Command("git", "-C", remote, "log", "--format=%s%n%(trailers)", "main").Output()
	fmt.Print(string(out))
	// Output:
	// committed [pools/agents/pool.yaml]
	// unchanged []
	// agents: create the pool
	// Slipway-Pool: agents
}
