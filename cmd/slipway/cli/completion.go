package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// completionTimeout bounds what a completion may spend asking a config
// repository or a server: a shell waits for it.
const completionTimeout = 3 * time.Second

// suggester lists candidates as "value\tdescription" for a completion.
type suggester func(ctx context.Context, cmd *cobra.Command) ([]string, error)

// complete turns s into a cobra completion: the candidates that start
// with what was typed, and nothing (never files) when s fails (no
// repository given, a server that does not answer).
func complete(s suggester) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		all, err := s(ctx, cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, c := range all {
			if strings.HasPrefix(c, toComplete) {
				out = append(out, c)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// argsUpTo completes the first n arguments with s, nothing after.
func argsUpTo(n int, s suggester) cobra.CompletionFunc {
	f := complete(s)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd, args, toComplete)
	}
}

// flag is a string flag's value, "" when cmd has no such flag; the first
// name that is set wins.
func flag(cmd *cobra.Command, names ...string) string {
	for _, n := range names {
		if v, err := cmd.Flags().GetString(n); err == nil && v != "" {
			return v
		}
	}
	// Completion runs no PersistentPreRunE, so the SLIPWAY_* variables that
	// fill these flags for a command are read here.
	for _, n := range names {
		for _, c := range flagConcepts {
			if c.name == n && c.env != "" {
				if v := os.Getenv(c.env); v != "" {
					return v
				}
			}
		}
	}
	return ""
}

// configRepo is the config repository and branch a command's flags name.
func configRepo(cmd *cobra.Command) (string, string, error) {
	repo := flag(cmd, "repo", "config-repo")
	if repo == "" {
		return "", "", fmt.Errorf("no --repo")
	}
	return repo, flag(cmd, "base", "branch"), nil
}

func suggestPools(ctx context.Context, cmd *cobra.Command) ([]string, error) {
	repo, branch, err := configRepo(cmd)
	if err != nil {
		return nil, err
	}
	return release.PoolNames(ctx, repo, branch)
}

func suggestGenerations(ctx context.Context, cmd *cobra.Command) ([]string, error) {
	repo, branch, err := configRepo(cmd)
	if err != nil {
		return nil, err
	}
	l, err := release.ListGenerations(ctx, repo, branch, flag(cmd, "pool"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range l.Generations {
		out = append(out, fmt.Sprintf("%s\t%s sequence %d %s", e.ID, e.Pool, e.Sequence, e.State))
	}
	return out, nil
}

func suggestRollouts(ctx context.Context, cmd *cobra.Command) ([]string, error) {
	url, branch, err := configRepo(cmd)
	if err != nil {
		return nil, err
	}
	p := flag(cmd, "pool")
	if p == "" {
		return nil, fmt.Errorf("no --pool")
	}
	repo, err := gitops.Open(ctx, url, gitops.WithDepth(0))
	if err != nil {
		return nil, err
	}
	recs, err := rollout.History(ctx, repo, branch, p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%s\t%s %s → %s", r.ID, r.Outcome, shortID(orNone(r.From)), shortID(r.To)))
	}
	return out, nil
}

func suggestJobs(ctx context.Context, cmd *cobra.Command) ([]string, error) {
	server, tokenFile := flag(cmd, "control", "server"), flag(cmd, "token-file")
	if server == "" || tokenFile == "" {
		return nil, fmt.Errorf("no --control or --token-file")
	}
	tok, err := readToken(tokenFile)
	if err != nil {
		return nil, err
	}
	c, err := controlapi.NewClient(server, tok)
	if err != nil {
		return nil, err
	}
	js, err := c.List(ctx, "", 100)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, j := range js {
		out = append(out, fmt.Sprintf("%s\t%s %s %s", j.ID, j.State, j.Pool, j.CreatedAt.UTC().Format(time.RFC3339)))
	}
	return out, nil
}

// addCompletions teaches the shell completion of every command the names
// it takes: pools and generations from the config repository --repo
// names, rollouts from its history, jobs from the control plane --control
// names.
func addCompletions(c *cobra.Command) {
	for _, sub := range c.Commands() {
		addCompletions(sub)
	}
	if c.Flags().Lookup("pool") != nil && (c.Flags().Lookup("repo") != nil || c.Flags().Lookup("config-repo") != nil) {
		_ = c.RegisterFlagCompletionFunc("pool", complete(suggestPools))
	}
	path := strings.TrimPrefix(c.CommandPath(), "slipway ")
	if c.Flags().Lookup("to") != nil && strings.HasPrefix(path, "rollout ") {
		_ = c.RegisterFlagCompletionFunc("to", complete(suggestGenerations))
	}
	switch path {
	case "generation show":
		c.ValidArgsFunction = argsUpTo(1, suggestGenerations)
	case "generation diff":
		c.ValidArgsFunction = argsUpTo(2, suggestGenerations)
	case "rollout status", "rollout resume", "rollout abort":
		c.ValidArgsFunction = argsUpTo(1, suggestRollouts)
	case "job show", "job cancel", "job trace", "job logs":
		c.ValidArgsFunction = argsUpTo(1, suggestJobs)
	}
}
