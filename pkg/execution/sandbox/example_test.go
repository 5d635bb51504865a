package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// The runner's own image: one layer with the binary, and its sha256 in the
// config for the identity proof. The same bytes give the same digest on any
// machine.
func ExampleRunnerImage() {
	dir, _ := os.MkdirTemp("", "runner-image-")
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "slipway-runner")
	_ = os.WriteFile(bin, []byte("#!/bin/sh\necho a stand-in for the runner\n"), 0o755)

	img, done, err := sandbox.RunnerImage(context.Background(), bin, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	d, _ := img.Digest()
	fmt.Println(d)
	cf, _ := img.ConfigFile()
	fmt.Println(sandbox.LabelRunnerSHA256 + "=" + cf.Config.Labels[sandbox.LabelRunnerSHA256])
	fmt.Println(sandbox.LabelRunnerProtocol + "=" + cf.Config.Labels[sandbox.LabelRunnerProtocol])

	rb, err := sandbox.UnpackRunner(context.Background(), img, filepath.Join(dir, "unpacked"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rb.Digest, rb.Protocol)
	// Output:
	// sha256:e04e2fd699db0f5a92b6d094b128d89bd245a958ed1f2f90611a3f6ca8b8a164
	// dev.slipway.runner.sha256=beb12c77881fba54ef5798d1bddeaa8bbd2f397f41de522a62b54d583e2c883e
	// dev.slipway.runner.protocol=1
	// sha256:beb12c77881fba54ef5798d1bddeaa8bbd2f397f41de522a62b54d583e2c883e 1
}
