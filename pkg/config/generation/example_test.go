package generation_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

func Example() {
	const (
		v1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		v2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	// A pool's first generation.
	first, err := generation.New("agents", nil, map[generation.Kind]generation.Pin{
		generation.Runner:        {Image: "registry.example/runner:v1@" + v1},
		generation.Policy:        {Git: &generation.GitPin{Repo: "https://git.example/policies.git", Commit: "0123456789abcdef0123456789abcdef01234567", Ref: "main"}},
		generation.SecretVersion: {ID: "vault://kv/agents/token#7"},
	}, &generation.Compatibility{
		ControlPlaneProtocol: generation.Range{Min: 3, Max: 4},
		RunnerProtocol:       generation.Range{Min: 2, Max: 2},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The next one changes the runner; everything else is carried over.
	next, err := generation.New("agents", first, map[generation.Kind]generation.Pin{
		generation.Runner: {Image: "registry.example/runner:v2@" + v2},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(first.Sequence, first.ID)
	fmt.Println(next.Sequence, next.ID)
	for _, c := range generation.Diff(first, next).Pins {
		fmt.Println(c.Kind, c.From.HumanTag(), "->", c.To.HumanTag(), c.To.Identity())
	}

	// A tag is refused.
	_, err = generation.New("agents", next, map[generation.Kind]generation.Pin{
		generation.Runner: {Image: "registry.example/runner:v3"},
	}, nil)
	fmt.Println(err)

	// The document round-trips, with the same id.
	b, _ := generation.Marshal(next)
	back, err := generation.Parse(b)
	fmt.Println(back.ID == next.ID, err)
	// Output:
	// 1 g-a31882d26e303c9bfdac32eea12212bffbb4f223bbd81e9965fb1cd0fed78ccc
	// 2 g-d088591c0c64462df1077e6fbd20a3489385808b084d4ff92ba93aa3d7d115ab
	// runner v1 -> v2 sha256:2222222222222222222222222222222222222222222222222222222222222222
	// generation: pins.runner.image: invalid generation: "registry.example/runner:v3" is a tag: pin it by digest (slipway pin)
	// true <nil>
}
