package kubesandbox

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func claimObj(uid, bound string, ready bool, podIPs ...string) *unstructured.Unstructured {
	c := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "sw-a", "uid": uid}}}
	if bound != "" {
		c.SetAnnotations(map[string]string{annotationSandboxName: bound})
	}
	st := map[string]any{}
	if ready {
		st["conditions"] = []any{map[string]any{"type": "Ready", "status": "True"}}
	}
	if len(podIPs) > 0 {
		var ips []any
		for _, ip := range podIPs {
			ips = append(ips, ip)
		}
		st["sandbox"] = map[string]any{"name": bound, "podIPs": ips}
	}
	c.Object["status"] = st
	return c
}

func sandboxObj(name, ownerKind, ownerUID string, ready bool, podIPs ...string) *unstructured.Unstructured {
	status := "False"
	if ready {
		status = "True"
	}
	var ips []any
	for _, ip := range podIPs {
		ips = append(ips, ip)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name, "ownerReferences": []any{map[string]any{
			"apiVersion": "x/v1", "kind": ownerKind, "name": "o", "uid": ownerUID, "controller": true}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": status}}, "podIPs": ips},
	}}
}

// A claim counts as bound to a Ready sandbox when it says so, or when the
// Sandbox it names is, as the watch saw it, controlled by it and Ready;
// never from a Sandbox still the warm pool's, another claim's, or not
// Ready, and never before the claim names one.
func TestReadyClaimFromItsSandbox(t *testing.T) {
	b := &Backend{}
	cases := []struct {
		name  string
		claim *unstructured.Unstructured
		sb    *unstructured.Unstructured
		want  bool
	}{
		{"the claim says Ready", claimObj("u1", "sb-1", true), nil, true},
		{"not bound", claimObj("u1", "", false), sandboxObj("sb-1", "SandboxClaim", "u1", true), false},
		{"Sandbox not seen", claimObj("u1", "sb-1", false), nil, false},
		{"Sandbox still the warm pool's", claimObj("u1", "sb-1", false), sandboxObj("sb-1", "SandboxWarmPool", "p1", true), false},
		{"Sandbox another claim's", claimObj("u1", "sb-1", false), sandboxObj("sb-1", "SandboxClaim", "u2", true), false},
		{"Sandbox not Ready", claimObj("u1", "sb-1", false), sandboxObj("sb-1", "SandboxClaim", "u1", false), false},
		{"Sandbox controlled by it and Ready", claimObj("u1", "sb-1", false), sandboxObj("sb-1", "SandboxClaim", "u1", true), true},
	}
	for _, tc := range cases {
		b.seen.replace(nil)
		if tc.sb != nil {
			b.seen.put(tc.sb)
		}
		if got := b.readyClaim(tc.claim); got != tc.want {
			t.Errorf("%s: readyClaim = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A change of the Sandboxes seen wakes whoever waits on changes.
func TestSeenChangesWake(t *testing.T) {
	var s seenObjects
	ch := s.changes()
	select {
	case <-ch:
		t.Fatal("woken with no change")
	default:
	}
	go s.put(sandboxObj("sb-1", "SandboxClaim", "u1", true))
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("a put did not wake the waiter")
	}
}

// The pod's IPs are checked against the claim's mirror of them, or, for a
// claim taken as Ready from its Sandbox (no mirror yet), the Sandbox's.
func TestSamePodIPsFromSandbox(t *testing.T) {
	pod := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"podIPs": []any{map[string]any{"ip": "10.1.0.5"}}}}}
	sb := sandboxObj("sb-1", "SandboxClaim", "u1", true, "10.1.0.5")
	other := sandboxObj("sb-1", "SandboxClaim", "u1", true, "10.1.0.9")
	if !samePodIPs(claimObj("u1", "sb-1", true, "10.1.0.5"), other, pod) {
		t.Error("the claim's own mirror of the IPs is what counts when it has one")
	}
	if samePodIPs(claimObj("u1", "sb-1", true, "10.1.0.9"), sb, pod) {
		t.Error("a pod with other IPs than the claim's passed")
	}
	if !samePodIPs(claimObj("u1", "sb-1", false), sb, pod) {
		t.Error("the Sandbox's IPs, the pod's, failed")
	}
	if samePodIPs(claimObj("u1", "sb-1", false), other, pod) {
		t.Error("a pod with other IPs than its Sandbox records passed")
	}
}
