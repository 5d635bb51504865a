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

// Decision says whether a destination may be reached, and by which entry
// or why not.
type Decision struct {
	Allowed bool
	Rule    string // the entry that allowed it
	Reason  string // why not
}

// CheckName decides on host:port as the sandbox asked for it, before any
// lookup. An IP address is decided on whole (Check). A name passes only
// when a name entry ("host:port" or "*.domain:port") lists it on that
// port: a name no entry lists is refused here and never looked up, so a
// sandbox cannot send data out in the names it asks for. A name that
// passes still has each address it resolves to checked by Check.
func (p *Policy) CheckName(host string, port uint16) Decision {
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.Check(host, port, ip)
	}
	if r, ok := p.nameRule(host, port); ok {
		return Decision{Allowed: true, Rule: r}
	}
	return Decision{Reason: fmt.Sprintf("%s:%d is on no allow-list entry (not looked up)", host, port)}
}

// nameRule is the first name entry listing name on port.
func (p *Policy) nameRule(host string, port uint16) (string, bool) {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, r := range p.rules {
		if r.port != port {
			continue
		}
		if (r.host != "" && r.host == name) || (r.suffix != "" && strings.HasSuffix(name, r.suffix)) {
			return r.entry, true
		}
	}
	return "", false
}

// addrRule is the first IP or CIDR entry containing ip on port.
func (p *Policy) addrRule(ip netip.Addr, port uint16) (string, bool) {
	for _, r := range p.rules {
		if r.port == port && r.prefix.IsValid() && r.prefix.Contains(ip) {
			return r.entry, true
		}
	}
	return "", false
}

// Check decides whether host (as asked) on port may be reached at ip, the
// address it is (an IP address) or resolved to (a name). An address is
// allowed by an IP or CIDR entry containing it. A name must be listed by a
// name entry (CheckName) and resolve to a public address, or to one an IP
// or CIDR entry lists: a listed name that resolves to loopback or a
// private address (DNS rebinding) is refused. Link-local addresses, the
// cloud metadata services' 169.254.169.254 and fd00:ec2::254 among them,
// are never allowed.
func (p *Policy) Check(host string, port uint16, ip netip.Addr) Decision {
	ip = ip.Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip == metadataV6 {
		return Decision{Reason: fmt.Sprintf("%s is link-local (cloud metadata): never allowed", ip)}
	}
	if ip.IsUnspecified() || ip.IsMulticast() {
		return Decision{Reason: fmt.Sprintf("%s is not a unicast address", ip)}
	}
	if _, err := netip.ParseAddr(host); err == nil {
		if r, ok := p.addrRule(ip, port); ok {
			return Decision{Allowed: true, Rule: r}
		}
		return Decision{Reason: fmt.Sprintf("%s:%d is on no allow-list entry", host, port)}
	}
	named, ok := p.nameRule(host, port)
	if !ok {
		return Decision{Reason: fmt.Sprintf("%s:%d is on no allow-list entry (not looked up)", host, port)}
	}
	if !(ip.IsLoopback() || ip.IsPrivate() || cgnat.Contains(ip)) {
		return Decision{Allowed: true, Rule: named}
	}
	if r, ok := p.addrRule(ip, port); ok {
		return Decision{Allowed: true, Rule: r}
	}
	return Decision{Reason: fmt.Sprintf("%s:%d resolves to %s, a loopback or private address no IP or CIDR entry lists", host, port, ip)}
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
