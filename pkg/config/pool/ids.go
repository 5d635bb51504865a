package pool

import (
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/internal/idprefix"
)

// Lister lists the names directly in a folder of a config repository
// (gitops.Tree's List): nothing, not an error, for a folder that does not
// exist.
type Lister func(dir string) ([]string, error)

// Names lists the pools of a config repository (the folders of pools/).
func Names(list Lister) ([]string, error) {
	names, err := list("pools")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if ValidName(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// GenerationIDs lists the generations promoted to pool name (the files of
// its generations folder), sorted.
func GenerationIDs(list Lister, name string) ([]string, error) {
	files, err := list(GenerationsDir(name))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if id, ok := strings.CutSuffix(f, ".yaml"); ok && strings.HasPrefix(id, "g-") {
			out = append(out, id)
		}
	}
	return out, nil
}

// ResolveGeneration finds the generation that prefix names (a whole id,
// or at least idprefix.MinLength hex digits after g-) among pool name's,
// or among every pool's when name is "". where names the repository in
// errors. It returns the pool the generation belongs to and its id; an
// ambiguous prefix is an *idprefix.AmbiguousError listing the candidates.
func ResolveGeneration(list Lister, name, prefix, where string) (string, string, error) {
	pools := []string{name}
	in := fmt.Sprintf("pool %s of %s", name, where)
	if name == "" {
		var err error
		if pools, err = Names(list); err != nil {
			return "", "", err
		}
		in = where
	}
	owner := map[string]string{}
	var ids []string
	for _, p := range pools {
		gs, err := GenerationIDs(list, p)
		if err != nil {
			return "", "", err
		}
		for _, id := range gs {
			owner[id] = p
			ids = append(ids, id)
		}
	}
	id, err := idprefix.Resolve(prefix, "g-", "generation", in, ids)
	if err != nil {
		return "", "", err
	}
	return owner[id], id, nil
}
