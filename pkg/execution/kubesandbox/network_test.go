package kubesandbox

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// A claim hands out a pod only if it was made for the pool's network as
// it is now: a re-rendered template leaves warm members of the old
// network behind, and those are refused naming the difference.
func TestCheckNetwork(t *testing.T) {
	pod := func(allow ...string) *unstructured.Unstructured {
		cs := []any{map[string]any{"name": kubeobjects.WorkspaceContainer, "command": []any{"serve"}}}
		if allow != nil {
			cs = append(cs, map[string]any{"name": kubeobjects.EgressContainer,
				"command": []any{"/usr/local/bin/slipway-runner", "egress", "--listen", sandbox.EgressProxyAddr, "--allow", strings.Join(allow, ",")}})
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p"}, "spec": map[string]any{"containers": cs}}}
	}
	allow := func(a ...string) sandbox.Spec { return sandbox.Spec{Network: sandbox.NetworkAllowList, Allow: a} }
	for _, tc := range []struct {
		name string
		pod  *unstructured.Unstructured
		spec sandbox.Spec
		want string
	}{
		{"deny", pod(), sandbox.Spec{}, ""},
		{"deny spelled out", pod(), sandbox.Spec{Network: sandbox.NetworkDeny}, ""},
		{"allow-list", pod("10.0.0.1:443", "10.0.0.2:80"), allow("10.0.0.1:443", "10.0.0.2:80"), ""},
		{"proxy, pool now deny", pod("10.0.0.1:443"), sandbox.Spec{}, `runs an egress proxy (allow "10.0.0.1:443"), the pool's network is deny`},
		{"no proxy, pool now allow-list", pod(), allow("10.0.0.1:443"), "runs no egress proxy"},
		{"another list", pod("10.0.0.1:443"), allow("10.0.0.1:443", "10.0.0.2:80"), `allows "10.0.0.1:443", the pool's list is "10.0.0.1:443,10.0.0.2:80"`},
	} {
		err := checkNetwork(tc.pod, tc.spec)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, sandbox.ErrIdentity) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
