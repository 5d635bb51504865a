package incluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the field manager Apply applies as.
const FieldManager = "slipway-incluster"

// Apply server-side applies objs in their order (Ordered's), as kubectl
// apply does, and returns at the first refusal, naming the object.
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := o.GetNamespace(); ns != "" {
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// WaitReady waits, at most timeout, until Deployment name in Namespace
// has replicas Ready pods; when it does not, its error holds the pods'
// state and their containers' logs.
func WaitReady(ctx context.Context, cs kubernetes.Interface, name string, replicas int32, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && d.Status.ReadyReplicas == replicas {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("deployment %s/%s has not %d Ready replicas after %s (%v):\n%s", Namespace, name, replicas, timeout, err, PodsState(ctx, cs, name))
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// PodsState is the status and log of app name's pods in Namespace (pods
// labelled app.kubernetes.io/name=name), for an error.
func PodsState(ctx context.Context, cs kubernetes.Interface, name string) string {
	ctx = context.WithoutCancel(ctx)
	pods, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
	if err != nil {
		return fmt.Sprintf("pods of %s: %v", name, err)
	}
	var b strings.Builder
	for _, p := range pods.Items {
		st, _ := json.MarshalIndent(p.Status.ContainerStatuses, "", "  ")
		fmt.Fprintf(&b, "pod %s: %s %v\n%s\n", p.Name, p.Status.Phase, p.Status.Conditions, st)
		log, err := cs.CoreV1().Pods(Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		fmt.Fprintf(&b, "log (%v):\n%s\n", err, log)
	}
	return b.String()
}

// ServiceURL is http://<cluster IP>:<port> of Service svc in Namespace,
// its port named http, once its /healthz there answers 200 to the host
// (through the node's kube-proxy rules; at most 30 s, as the rules may lag
// the endpoints).
func ServiceURL(ctx context.Context, cs kubernetes.Interface, svc string) (string, error) {
	s, err := cs.CoreV1().Services(Namespace).Get(ctx, svc, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("service %s/%s: %w", Namespace, svc, err)
	}
	for _, p := range s.Spec.Ports {
		if p.Name != "http" || s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone {
			continue
		}
		u := fmt.Sprintf("http://%s:%d", s.Spec.ClusterIP, p.Port)
		// Its own connections, closed after each probe: a connection made
		// before kube-proxy programmed the Service would stay with
		// whatever answered it (shared keep-alives would hand it to the
		// caller's next client of http.DefaultTransport).
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := hc.Get(u + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return u, nil
				}
				err = fmt.Errorf("GET /healthz answered %s", resp.Status)
			}
			if time.Now().After(deadline) {
				return "", fmt.Errorf("service %s/%s at %s from the host: %w", Namespace, svc, u, err)
			}
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return "", fmt.Errorf("service %s/%s has no cluster IP with a port named http", Namespace, svc)
}
