package tenancy

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// Profile is profiles/<name>.yaml: a capability profile, what a job run
// under it may do. Jobs record the profile's revision and digest, so a
// profile can change without changing what an old job meant.
type Profile struct {
	Name string `json:"name"`
	// Network is what the job's sandbox may reach.
	Network Network `json:"network"`
	// MaxDuration bounds a job's deadline (above 0).
	MaxDuration time.Duration `json:"maxDuration"`
	// MaxCommandDuration bounds each command; 0: only MaxDuration.
	MaxCommandDuration time.Duration `json:"maxCommandDuration,omitempty"`
	// MaxOutputBytes and MaxOutputLines cap a job's kept output.
	MaxOutputBytes int64 `json:"maxOutputBytes"`
	MaxOutputLines int64 `json:"maxOutputLines"`
	// Secrets are the secret versions a job may be issued (none: no secret).
	Secrets []string `json:"secrets,omitempty"`
	// Pools and Templates restrict where a job may run; empty: any.
	Pools     []string `json:"pools,omitempty"`
	Templates []string `json:"templates,omitempty"`
}

// Network is "deny" (nothing) or "allow-list" (only Allow).
type Network struct {
	Mode string `json:"mode"`
	// Allow holds host:port, CIDR:port or *.domain:port entries (IPv6 in
	// brackets: [2001:db8::1]:443, [2001:db8::/32]:443).
	Allow []string `json:"allow,omitempty"`
}

// Network modes.
const (
	NetworkDeny      = "deny"
	NetworkAllowList = "allow-list"
)

// AllowsPool reports whether the profile may run on pool (an empty Pools
// list allows any).
func (p *Profile) AllowsPool(name string) bool {
	return len(p.Pools) == 0 || slices.Contains(p.Pools, name)
}

// AllowsTemplate reports whether the profile may run template (an empty
// Templates list allows any).
func (p *Profile) AllowsTemplate(name string) bool {
	return len(p.Templates) == 0 || slices.Contains(p.Templates, name)
}

type profileDoc struct {
	APIVersion         string         `yaml:"apiVersion"`
	Kind               string         `yaml:"kind"`
	Name               string         `yaml:"name"`
	Network            networkDoc     `yaml:"network"`
	MaxDuration        pool.Duration  `yaml:"maxDuration"`
	MaxCommandDuration *pool.Duration `yaml:"maxCommandDuration,omitempty"`
	Output             outputDoc      `yaml:"output"`
	Secrets            []string       `yaml:"secrets,omitempty"`
	Pools              []string       `yaml:"pools,omitempty"`
	Templates          []string       `yaml:"templates,omitempty"`
}

type networkDoc struct {
	Mode  string   `yaml:"mode"`
	Allow []string `yaml:"allow,omitempty"`
}

type outputDoc struct {
	MaxBytes whole `yaml:"maxBytes"`
	MaxLines whole `yaml:"maxLines"`
}

// ParseProfile decodes and validates profiles/<name>.yaml; path is the
// file's path in the config repository (its name must equal the profile's)
// and labels errors.
func ParseProfile(path string, b []byte) (*Profile, error) {
	var d profileDoc
	doc, err := decode(b, path, &d)
	if err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error { return fieldError(path, doc, field, format, args...) }
	if err := header(fe, d.APIVersion, d.Kind, KindProfile); err != nil {
		return nil, err
	}
	if err := checkName(fe, path, d.Name, "profile"); err != nil {
		return nil, err
	}
	switch d.Network.Mode {
	case NetworkDeny:
		if len(d.Network.Allow) > 0 {
			return nil, fe("network.allow", "an allow list with mode deny (say mode: allow-list)")
		}
	case NetworkAllowList:
		if len(d.Network.Allow) == 0 {
			return nil, fe("network.allow", "required with mode allow-list (or say mode: deny)")
		}
	default:
		return nil, fe("network.mode", "%q: want deny or allow-list", d.Network.Mode)
	}
	seen := map[string]bool{}
	for i, a := range d.Network.Allow {
		f := fmt.Sprintf("network.allow[%d]", i)
		if err := checkAllow(a); err != nil {
			return nil, fe(f, "%q: %v", a, err)
		}
		if seen[a] {
			return nil, fe(f, "%q listed twice", a)
		}
		seen[a] = true
	}
	p := &Profile{
		Name:           d.Name,
		Network:        Network{Mode: d.Network.Mode, Allow: d.Network.Allow},
		MaxDuration:    d.MaxDuration.Duration,
		MaxOutputBytes: int64(d.Output.MaxBytes),
		MaxOutputLines: int64(d.Output.MaxLines),
		Secrets:        d.Secrets,
		Pools:          d.Pools,
		Templates:      d.Templates,
	}
	if p.MaxDuration <= 0 {
		return nil, fe("maxDuration", "required, above 0 (like 2m)")
	}
	if c := d.MaxCommandDuration; c != nil {
		switch {
		case c.Duration <= 0:
			return nil, fe("maxCommandDuration", "%s: want above 0 (leave it out for maxDuration alone)", c.Duration)
		case c.Duration > p.MaxDuration:
			return nil, fe("maxCommandDuration", "%s is above maxDuration %s", pool.FormatDuration(c.Duration), pool.FormatDuration(p.MaxDuration))
		}
		p.MaxCommandDuration = c.Duration
	}
	switch {
	case p.MaxOutputBytes <= 0:
		return nil, fe("output.maxBytes", "%d: required, above 0", p.MaxOutputBytes)
	case p.MaxOutputLines <= 0:
		return nil, fe("output.maxLines", "%d: required, above 0", p.MaxOutputLines)
	}
	if err := names(fe, "secrets", p.Secrets, nil, "secret version"); err != nil {
		return nil, err
	}
	if err := names(fe, "pools", p.Pools, pool.ValidName, "pool"); err != nil {
		return nil, err
	}
	if err := names(fe, "templates", p.Templates, nil, "template"); err != nil {
		return nil, err
	}
	return p, nil
}

// checkAllow checks one allow-list entry's shape: host:port, CIDR:port or
// *.domain:port.
func checkAllow(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("want host:port, CIDR:port or *.domain:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Errorf("port %q: want 1 to 65535", port)
	}
	switch {
	case strings.Contains(host, "/"):
		_, network, err := net.ParseCIDR(host)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR", host)
		}
		if network.String() != host {
			return fmt.Errorf("%q has host bits set (the network is %s)", host, network)
		}
	case strings.HasPrefix(host, "*."):
		if !dnsName(host[2:]) {
			return fmt.Errorf("%q is not *. followed by a domain name", host)
		}
	case net.ParseIP(host) != nil:
	case !dnsName(host):
		return fmt.Errorf("%q is not a host name, IP address, CIDR or *.domain", host)
	}
	return nil
}

// dnsName reports whether s is a DNS name: dot-separated labels of
// letters, digits and inner '-', at most 253 characters.
func dnsName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
