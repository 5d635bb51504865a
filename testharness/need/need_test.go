package need

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Missing skips outside CI and fails in CI, in a child test binary so that
// the failure it provokes is its own.
func TestMissing(t *testing.T) {
	if os.Getenv("NEED_CHILD") == "1" {
		Binary(t, "slipway-no-such-binary", "apt-get install nothing")
		t.Fatal("not reached")
	}
	for _, tc := range []struct {
		ci   string
		fail bool
		want string
	}{
		{"", false, "--- SKIP"},
		{"false", false, "--- SKIP"},
		{"true", true, "--- FAIL"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "NEED_CHILD=1", "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fail || !strings.Contains(string(out), tc.want) ||
			!strings.Contains(string(out), "slipway-no-such-binary is not installed: apt-get install nothing") {
			t.Errorf("CI=%q: err %v, output:\n%s", tc.ci, err, out)
		}
	}
}

func TestFound(t *testing.T) {
	t.Setenv("NEED_TEST_VAR", "sh")
	if p := Binary(t, "sh", ""); p == "" {
		t.Error("sh not found")
	}
	if v := EnvBinary(t, "NEED_TEST_VAR", ""); v != "sh" {
		t.Errorf("EnvBinary = %q", v)
	}
}
