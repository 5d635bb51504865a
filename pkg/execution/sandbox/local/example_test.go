package local_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// A warm sandbox from a template image and a runner image, claimed, used
// and deleted. (Not run as a test: it needs the two images.)
func Example() {
	ctx := context.Background()
	var templateImg, runnerImg v1.Image // verified images, by digest, from the generation's pins

	rb, err := sandbox.UnpackRunner(ctx, runnerImg, "/var/lib/slipway/runner-unpacked")
	if err != nil {
		panic(err)
	}
	b, err := local.New("/var/lib/slipway/sandboxes")
	if err != nil {
		panic(err)
	}
	defer b.Close()
	dead, _ := sandbox.Reap(ctx, b) // what died with the previous runtime
	fmt.Println("reaped", dead)

	s, err := b.Create(ctx, sandbox.Spec{
		Pool: "default", Generation: "g-5f1c", Owner: sandbox.OwnerWarm,
		Template: templateImg, Runner: rb,
	})
	if err != nil {
		panic(err)
	}
	if s, err = b.SetOwner(ctx, s.ID, sandbox.OwnerWarm, "claim-42"); err != nil {
		panic(err)
	}
	st, err := s.Exec(ctx, runner.ExecRequest{Argv: []string{"make", "test"}, TimeoutMs: 600_000}, os.Stdout, os.Stderr)
	if err != nil {
		panic(err)
	}
	fmt.Println("exit", st.ExitCode)
	_ = b.Delete(ctx, s.ID)
}

// The state directory belongs to one Backend at a time: a second one on
// the same directory is refused with ErrStateInUse until the first is
// closed; a later Backend there finds what the earlier one left (here:
// nothing). This part runs without bubblewrap.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "local-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	_, err = local.New("relative/state")
	fmt.Println(err)

	b, err := local.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	_, err = local.New(dir)
	fmt.Println("second backend refused:", errors.Is(err, local.ErrStateInUse))

	b.Close()
	b, err = local.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	left, err := b.List(context.Background(), sandbox.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after reopening:", len(left), "sandboxes")
	// Output:
	// local: state directory "relative/state" is not absolute
	// second backend refused: true
	// after reopening: 0 sandboxes
}
