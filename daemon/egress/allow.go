// Package egress is termd's allow-list proxy: an HTTP forward proxy and
// CONNECT proxy (no TLS interception) through which executions with network
// mode egress:NAME reach the hosts of the allow-list NAME and nothing else.
//
// Destinations are checked by host name against the list. A name is resolved
// once, by the proxy, and the address that was checked is the address dialed
// (a DNS answer that changes between the check and the connect changes
// nothing). Addresses that are not public (loopback, private, link-local,
// carrier-grade NAT, unique-local, multicast, unspecified) are refused unless
// the operator named them: an IP or CIDR entry in the list, or a pinned
// address in the hosts map (egress.hosts, for air-gapped mirrors and tests).
//
// Every connection and every refusal is counted per execution (Account), so
// the receipt can name every destination with its bytes, and refusals are
// reported as they happen so an agent learns what to ask for.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Reasons a destination is refused (stable strings: receipts and events
// carry them).
const (
	ReasonNotListed      = "not_on_allow_list"
	ReasonPortNotListed  = "port_not_allowed"
	ReasonIPLiteral      = "ip_literal_not_listed"
	ReasonPrivateAddress = "private_address"
	ReasonResolveFailed  = "resolve_failed"
	ReasonDialFailed     = "connect_failed"
	ReasonBadRequest     = "bad_request"
	ReasonBusy           = "too_many_connections"
)

// DefaultPorts are the ports a host entry without a port allows.
var DefaultPorts = []uint16{80, 443}

// entry is one allow-list line.
type entry struct {
	host     string // lower case, no trailing dot; "" for address entries
	wildcard bool   // *.host: any name strictly beneath host
	prefix   netip.Prefix
	anyPort  bool
	port     uint16 // 0: DefaultPorts
}

// List is a parsed allow-list.
type List struct {
	Name    string
	entries []entry
}

// ParseList parses the entries of the allow-list name. An entry is a host
// name (registry.npmjs.org), a wildcard (*.example.com: names beneath
// example.com, not example.com itself), an IP address or CIDR (10.1.2.3,
// 10.0.0.0/8, [fd00::1]), each optionally followed by :PORT or :* (any
// port); without a port an entry allows 80 and 443.
func ParseList(name string, patterns []string) (*List, error) {
	if name == "" || strings.ContainsAny(name, " :/\t") {
		return nil, fmt.Errorf("egress allow-list name %q: use a plain name such as registries", name)
	}
	l := &List{Name: name}
	for i, p := range patterns {
		e, err := parseEntry(p)
		if err != nil {
			return nil, fmt.Errorf("egress allow-list %q entry %d (%q): %w", name, i+1, p, err)
		}
		l.entries = append(l.entries, e)
	}
	return l, nil
}

func parseEntry(p string) (entry, error) {
	var e entry
	s := strings.ToLower(strings.TrimSpace(p))
	if s == "" {
		return e, errors.New("empty entry")
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, " \t?#@") {
		return e, errors.New("write a host name, *.domain, an IP address or a CIDR, optionally with :PORT or :* — not a URL")
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["): // [v6] or [v6]:port
		end := strings.Index(s, "]")
		if end < 0 {
			return e, errors.New("unclosed [")
		}
		host, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if s[end+1:] != "" && !strings.HasPrefix(s[end+1:], ":") {
			return e, errors.New("text after ]")
		}
	case strings.Count(s, ":") == 1:
		host, port = s[:strings.Index(s, ":")], s[strings.Index(s, ":")+1:]
	}
	switch port {
	case "":
	case "*":
		e.anyPort = true
	default:
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return e, fmt.Errorf("port %q is not a number from 1 to 65535 (or * for any)", port)
		}
		e.port = uint16(n)
	}
	if pf, err := netip.ParsePrefix(host); err == nil {
		e.prefix = pf.Masked()
		return e, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		e.prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return e, nil
	}
	host = strings.TrimSuffix(host, ".")
	if strings.HasPrefix(host, "*.") {
		e.wildcard = true
		host = host[2:]
	}
	if err := checkHostName(host); err != nil {
		return e, err
	}
	e.host = host
	return e, nil
}

// checkHostName accepts DNS names (letters, digits, hyphens, underscores,
// dots), with no empty label.
func checkHostName(h string) error {
	if h == "" || len(h) > 253 {
		return errors.New("empty or over-long host name")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return errors.New("empty label in host name")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				if c == '*' {
					return errors.New("a wildcard may only be the whole first label (*.example.com)")
				}
				return fmt.Errorf("character %q is not allowed in a host name", c)
			}
		}
	}
	return nil
}

func (e entry) portOK(port uint16) bool {
	if e.anyPort {
		return true
	}
	if e.port != 0 {
		return e.port == port
	}
	for _, p := range DefaultPorts {
		if p == port {
			return true
		}
	}
	return false
}

func (e entry) nameMatches(host string) bool {
	if e.host == "" {
		return false
	}
	if e.wildcard {
		return strings.HasSuffix(host, "."+e.host)
	}
	return host == e.host
}

// NormalizeHost lower-cases a host and strips a trailing dot and IPv6
// brackets.
func NormalizeHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// CheckName decides a destination host name (not an IP literal) and port:
// "" when a name entry covers it, else the reason it is refused.
func (l *List) CheckName(host string, port uint16) string {
	host = NormalizeHost(host)
	nameSeen := false
	for _, e := range l.entries {
		if e.nameMatches(host) {
			nameSeen = true
			if e.portOK(port) {
				return ""
			}
		}
	}
	if nameSeen {
		return ReasonPortNotListed
	}
	return ReasonNotListed
}

// AddressListed says whether an IP or CIDR entry names a (port included).
func (l *List) AddressListed(a netip.Addr, port uint16) bool {
	a = a.Unmap()
	for _, e := range l.entries {
		if e.prefix.IsValid() && e.prefix.Contains(a) && e.portOK(port) {
			return true
		}
	}
	return false
}

// Hosts returns the list's entries as written back (sorted), for doctor and
// explanations.
func (l *List) Hosts() []string {
	out := make([]string, 0, len(l.entries))
	for _, e := range l.entries {
		s := e.host
		if e.wildcard {
			s = "*." + s
		}
		if e.prefix.IsValid() {
			s = e.prefix.String()
			if e.prefix.IsSingleIP() {
				s = e.prefix.Addr().String()
			}
		}
		switch {
		case e.anyPort:
			s += ":*"
		case e.port != 0:
			s += ":" + strconv.Itoa(int(e.port))
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Public says whether a is an address on the public internet: not loopback,
// private (RFC 1918, fc00::/7), link-local, carrier-grade NAT (100.64/10),
// multicast, unspecified, or in the IPv4 reserved blocks.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// DefaultLists are the allow-lists termd knows without configuration.
// registries: the package registries of npm, Go modules, PyPI and crates.
func DefaultLists() map[string][]string {
	return map[string][]string{
		"registries": {
			"registry.npmjs.org", "registry.yarnpkg.com",
			"proxy.golang.org", "sum.golang.org",
			"pypi.org", "files.pythonhosted.org",
			"crates.io", "static.crates.io", "index.crates.io",
		},
	}
}
