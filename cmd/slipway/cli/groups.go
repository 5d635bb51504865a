package cli

import "github.com/spf13/cobra"

// commandGroups are the sections of the top-level help, in kubectl's manner,
// each with the top-level commands it lists.
var commandGroups = []struct {
	group    cobra.Group
	commands []string
}{
	{cobra.Group{ID: "release", Title: "Release Commands (pin, build, sign, verify, generations):"},
		[]string{"resolve", "pin", "lint", "template", "image", "keys", "sign", "attest", "verify", "verify-blob", "generation", "promote", "release"}},
	{cobra.Group{ID: "config", Title: "Config Repository Commands:"}, []string{"config", "pool"}},
	{cobra.Group{ID: "rollouts", Title: "Rollout Commands:"}, []string{"rollout", "evidence", "canary"}},
	{cobra.Group{ID: "runtime", Title: "Runtime Commands:"}, []string{"runtime", "claim", "checkpoint", "runs"}},
	{cobra.Group{ID: "control", Title: "Control Plane Commands:"}, []string{"control", "tenant", "job"}},
	{cobra.Group{ID: "kubernetes", Title: "Kubernetes and Argo CD Commands:"}, []string{"render", "apply", "argocd"}},
	{cobra.Group{ID: "operations", Title: "Operations Commands:"}, []string{"console", "incidents", "cleanup", "cost", "gc"}},
	{cobra.Group{ID: "other", Title: "Other Commands:"}, []string{"version"}},
}

// groupCommands sorts root's commands into commandGroups; help and
// completion go under Other, as in kubectl.
func groupCommands(root *cobra.Command) {
	byName := map[string]*cobra.Command{}
	for _, c := range root.Commands() {
		byName[c.Name()] = c
	}
	for _, g := range commandGroups {
		root.AddGroup(&g.group)
		for _, name := range g.commands {
			if c := byName[name]; c != nil {
				c.GroupID = g.group.ID
			}
		}
	}
	root.SetHelpCommandGroupID("other")
	root.SetCompletionCommandGroupID("other")
}
