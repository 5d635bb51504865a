package pgtest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Option configures Start.
type Option func(*options) error

type options struct {
	also, clients string
}

// ListenAlso makes the server listen on ip (an address of this machine
// other than 127.0.0.1, say the bridge of kubetest's node) as well, and
// trust the superuser's connections from clients (a CIDR, say the node's
// pods), as it trusts those from 127.0.0.1: the host's PostgreSQL that a
// cluster's pods reach over the node's network, nothing leaving the
// machine.
func ListenAlso(ip, clients string) Option {
	return func(o *options) error {
		if a := net.ParseIP(ip); a == nil || a.IsLoopback() || a.IsUnspecified() {
			return fmt.Errorf("pgtest: ListenAlso address %q: want one IP address of this machine, not loopback or unspecified", ip)
		}
		if _, _, err := net.ParseCIDR(clients); err != nil {
			return fmt.Errorf("pgtest: ListenAlso clients %q: %w", clients, err)
		}
		o.also, o.clients = ip, clients
		return nil
	}
}

// allow appends a line to the cluster's pg_hba.conf trusting connections
// from clients.
func (s *Server) allow(clients string) error {
	f, err := os.OpenFile(filepath.Join(s.data(), "pg_hba.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("pgtest: allow %s: %w", clients, err)
	}
	if _, err := fmt.Fprintf(f, "host all all %s trust\n", clients); err != nil {
		f.Close()
		return fmt.Errorf("pgtest: allow %s: %w", clients, err)
	}
	return f.Close()
}
