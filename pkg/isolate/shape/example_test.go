package shape_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// A template image with no working directory and only its own variable
// gets the default workspace, which is also HOME, and the default PATH.
func ExampleEnv() {
	workdir := shape.Workdir("")
	env := shape.Env([]string{"AGENT_CACHE=/home/user/.cache/agent"}, workdir, map[string]string{"TZ": "UTC"})
	fmt.Println(workdir)
	fmt.Println(env["HOME"], env["PATH"], env["AGENT_CACHE"], env["TZ"])
	fmt.Println(shape.RefreshKinds())
	// Output:
	// /workspace
	// /workspace /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /home/user/.cache/agent UTC
	// [machine-id ssh-host-keys random-seed]
}
