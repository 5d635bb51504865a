package kubetest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/testharness/dnstest"
)

// ClusterDomain is the DNS domain of the cluster's Services: a Service s
// of namespace ns is s.ns.svc.ClusterDomain.
const ClusterDomain = "cluster.local"

// ClusterDNS is where a cluster WithServices answers its pods' DNS
// questions (the kubelet's clusterDNS): the node's bridge, port 53. It
// stands in for CoreDNS's kubernetes plugin, Service names only: each
// question for s.ns.svc.cluster.local is answered with the cluster IP the
// API server holds for Service s at that moment (NXDOMAIN for a Service
// that does not exist or has none, and for every other name: no pod
// question leaves the machine).
var ClusterDNS = net.JoinHostPort(PodGateway, "53")

var servicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// startDNS serves ClusterDNS until Close.
func (c *Cluster) startDNS() error {
	dyn, err := c.Dynamic()
	if err != nil {
		return fmt.Errorf("kubetest: cluster DNS: %w", err)
	}
	s, err := dnstest.ListenFunc(ClusterDNS, serviceLookup(dyn))
	if err != nil {
		return fmt.Errorf("kubetest: cluster DNS: %w", err)
	}
	c.dns = s
	return nil
}

// serviceLookup answers a Service's name with its cluster IP, read from the
// API server for every question.
func serviceLookup(dyn dynamic.Interface) dnstest.LookupFunc {
	return func(name string) ([]netip.Addr, bool) {
		rest, ok := strings.CutSuffix(name, ".svc."+ClusterDomain)
		if !ok {
			return nil, false
		}
		svc, ns, ok := strings.Cut(rest, ".")
		if !ok || strings.Contains(ns, ".") {
			return nil, false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		u, err := dyn.Resource(servicesGVR).Namespace(ns).Get(ctx, svc, metav1.GetOptions{})
		if err != nil {
			return nil, false
		}
		ip, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP")
		a, err := netip.ParseAddr(ip)
		if err != nil { // "None" (headless) or not yet given one
			return nil, false
		}
		return []netip.Addr{a}, true
	}
}
