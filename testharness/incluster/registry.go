package incluster

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// BridgeRegistry starts go-containerregistry's in-process registry on ip
// (the node's bridge, kubetest.PodGateway: an RFC 1918 address, so
// clients speak plain HTTP to it as to 127.0.0.1; pods and the host both
// reach it) and returns its host:port and how to stop it.
func BridgeRegistry(ip string) (string, func(), error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", nil, fmt.Errorf("a registry on %s: %w", ip, err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	return l.Addr().String(), func() { srv.Close() }, nil
}
