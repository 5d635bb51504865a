package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ErrInvalid wraps every error about a bad allow-list entry.
var ErrInvalid = errors.New("egress: invalid allow-list entry")

// Policy is a parsed allow-list. The zero Policy allows nothing.
type Policy struct {
	rules []rule
}

type rule struct {
	entry  string
	host   string       // exact DNS name, lower-case ("" for prefix rules)
	suffix string       // ".domain" for "*.domain"
	prefix netip.Prefix // IP or CIDR rules
	port   uint16
}

// Parse reads allow entries; the error names each bad entry by index.
func Parse(allow []string) (*Policy, error) {
	p := &Policy{}
	var errs []error
	for i, e := range allow {
		r, err := parseRule(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: allow[%d] %q: %v", ErrInvalid, i, e, err))
			continue
		}
		p.rules = append(p.rules, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func parseRule(e string) (rule, error) {
	i := strings.LastIndexByte(e, ':')
	if i <= 0 {
		return rule{}, errors.New("want host:port, CIDR:port or *.domain:port")
	}
	host, portStr := e[:i], e[i+1:]
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return rule{}, fmt.Errorf("port %q is not 1 to 65535", portStr)
	}
	r := rule{entry: e, port: uint16(port)}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch {
	case strings.Contains(host, "/"):
		pfx, err := netip.ParsePrefix(host)
		if err != nil {
			return rule{}, fmt.Errorf("bad CIDR: %v", err)
		}
		r.prefix = pfx.Masked()
	case strings.HasPrefix(host, "*."):
		d := strings.ToLower(host[1:])
		if !validName(d[1:]) {
			return rule{}, fmt.Errorf("%q is not a domain", d[1:])
		}
		r.suffix = d
	default:
		if ip, err := netip.ParseAddr(host); err == nil {
			r.prefix = netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())
		} else if validName(host) {
			r.host = strings.ToLower(host)
		} else {
			return rule{}, fmt.Errorf("%q is not a host name, IP address or CIDR", host)
		}
	}
	return r, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || strings.Trim(strings.ToLower(l), "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// Decision says whether one resolved address of a destination may be
// reached, and by which entry or why not.
type Decision struct {
	Allowed bool
	Rule    string // the entry that allowed it
	Reason  string // why not
}

// Check decides whether host (as asked) on port may be reached at the
// resolved address ip.
func (p *Policy) Check(host string, port uint16, ip netip.Addr) Decision {
	ip = ip.Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip == metadataV6 {
		return Decision{Reason: fmt.Sprintf("%s is link-local (cloud metadata): never allowed", ip)}
	}
	if ip.IsUnspecified() || ip.IsMulticast() {
		return Decision{Reason: fmt.Sprintf("%s is not a unicast address", ip)}
	}
	public := !(ip.IsLoopback() || ip.IsPrivate() || cgnat.Contains(ip))
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, r := range p.rules {
		if r.port != port {
			continue
		}
		switch {
		case r.prefix.IsValid():
			if r.prefix.Contains(ip) {
				return Decision{Allowed: true, Rule: r.entry}
			}
		case public && r.host != "" && r.host == name:
			return Decision{Allowed: true, Rule: r.entry}
		case public && r.suffix != "" && strings.HasSuffix(name, r.suffix):
			return Decision{Allowed: true, Rule: r.entry}
		}
	}
	if !public {
		return Decision{Reason: fmt.Sprintf("%s:%d resolves to %s, a loopback or private address no IP or CIDR entry lists", host, port, ip)}
	}
	return Decision{Reason: fmt.Sprintf("%s:%d (%s) is on no allow-list entry", host, port, ip)}
}

var (
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
)

// splitHostPort splits "host:port" as a proxy request names it.
func splitHostPort(hp string) (string, uint16, error) {
	h, ps, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	return h, uint16(port), nil
}
