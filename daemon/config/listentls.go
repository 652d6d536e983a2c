package config

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// ListenTLS is termd's optional TCP listener with mutual TLS: each client
// certificate maps to a principal here, as uids do on the socket.
type ListenTLS struct {
	Address      string      `yaml:"address" doc:"HOST:PORT to listen on with mutual TLS (TLS 1.3, a client certificate required and verified against client_ca_file); empty: no TCP listener (the default). Changes take effect after a restart"`
	CertFile     string      `yaml:"cert_file" doc:"termd's server certificate (PEM; chain after the leaf) that clients verify: it must carry the address's IP or DNS name as a SAN"`
	KeyFile      string      `yaml:"key_file" doc:"the private key of cert_file (PEM); must not be readable by group or others (chmod 600)"`
	ClientCAFile string      `yaml:"client_ca_file" doc:"CA certificate(s) (PEM) that client certificates must chain to; a client without a certificate, or with one from another CA, fails the handshake before any call"`
	Clients      []TLSClient `yaml:"clients" doc:"the principals client certificates map to, read again on SIGHUP. Each entry: name (the principal's name in sessions, plans and receipts, unique), one or more of cn (the certificate's subject CN), uri (a URI SAN, e.g. spiffe://fleet/ci), dns (a DNS SAN) that must all match, sha256 (optional pin: the certificate's SHA-256 fingerprint, hex), role (operator, agent or viewer), run_as (the local user its commands run as: required for agents, optional for operators; without it an operator's or viewer's uid is nobody's), gateway (true: the certificate is a termd-gateway's, which may name the person it acts for in x-termd-name, recorded with the gateway in approvals and receipts). A verified certificate that matches no entry is refused"`
}

// TLSClient maps a client certificate to a principal.
type TLSClient struct {
	Name    string `yaml:"name"`
	CN      string `yaml:"cn"`
	URI     string `yaml:"uri"`
	DNS     string `yaml:"dns"`
	SHA256  string `yaml:"sha256"`
	Role    string `yaml:"role"`
	RunAs   string `yaml:"run_as"`
	Gateway bool   `yaml:"gateway"`
}

// Enabled says whether termd listens on TCP.
func (l ListenTLS) Enabled() bool { return l.Address != "" }

// RoleValue is the entry's role.
func (c TLSClient) RoleValue() Role {
	r, _ := RoleNamed(c.Role)
	return r
}

// Identity describes what the entry matches, for messages.
func (c TLSClient) Identity() string {
	var parts []string
	if c.CN != "" {
		parts = append(parts, "cn="+c.CN)
	}
	if c.URI != "" {
		parts = append(parts, "uri="+c.URI)
	}
	if c.DNS != "" {
		parts = append(parts, "dns="+c.DNS)
	}
	if c.SHA256 != "" {
		parts = append(parts, "sha256="+c.SHA256)
	}
	return strings.Join(parts, " ")
}

// Matches says whether a verified leaf certificate is this entry's: every
// identity field the entry sets must match, and the pin when set.
func (c TLSClient) Matches(leaf *x509.Certificate) bool {
	if c.CN == "" && c.URI == "" && c.DNS == "" {
		return false
	}
	if c.CN != "" && leaf.Subject.CommonName != c.CN {
		return false
	}
	if c.URI != "" && !slices.ContainsFunc(leaf.URIs, func(u *url.URL) bool { return u.String() == c.URI }) {
		return false
	}
	if c.DNS != "" && !slices.ContainsFunc(leaf.DNSNames, func(d string) bool { return strings.EqualFold(d, c.DNS) }) {
		return false
	}
	if c.SHA256 != "" && !strings.EqualFold(Fingerprint(leaf), normalizePin(c.SHA256)) {
		return false
	}
	return true
}

// Fingerprint is the SHA-256 of a certificate's DER in lower-case hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// normalizePin accepts "AB:CD:..." as openssl prints it, and plain hex.
func normalizePin(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, ":", ""))
}

// ClientFor maps a verified leaf certificate to its entry. It returns an
// error naming the certificate when no entry, or more than one, matches.
func (l ListenTLS) ClientFor(leaf *x509.Certificate) (TLSClient, error) {
	var found []TLSClient
	for _, c := range l.Clients {
		if c.Matches(leaf) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return TLSClient{}, fmt.Errorf("client certificate %s maps to no principal on this termd: add it to listen_tls.clients in termd's config (e.g. {name: NAME, cn: %q, role: agent, run_as: USER}) and reload (SIGHUP)", DescribeCert(leaf), leaf.Subject.CommonName)
	}
	names := make([]string, len(found))
	for i, c := range found {
		names[i] = c.Name
	}
	return TLSClient{}, fmt.Errorf("client certificate %s matches more than one entry of listen_tls.clients (%s): make the entries narrower (add uri, dns or a sha256 pin)", DescribeCert(leaf), strings.Join(names, ", "))
}

// DescribeCert names a certificate for people: subject, SANs, fingerprint.
func DescribeCert(c *x509.Certificate) string {
	s := fmt.Sprintf("subject %q", c.Subject.String())
	for _, u := range c.URIs {
		s += " uri " + u.String()
	}
	for _, d := range c.DNSNames {
		s += " dns " + d
	}
	return s + " sha256 " + Fingerprint(c)
}

var tlsNameRE = func(s string) bool {
	if s == "" || len(s) > 64 || strings.HasPrefix(s, "token:") || strings.HasPrefix(s, "uid:") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.@", r)) {
			return false
		}
	}
	return true
}

// validate checks the section: files present and loadable, the key private,
// every client entry complete and distinct.
func (l ListenTLS) validate() error {
	if !l.Enabled() {
		if l.CertFile != "" || l.KeyFile != "" || l.ClientCAFile != "" || len(l.Clients) > 0 {
			return errors.New("listen_tls: cert_file, key_file, client_ca_file or clients are set but address is empty; set listen_tls.address (HOST:PORT) to listen, or remove the section")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(l.Address)
	if err != nil || port == "" {
		return fmt.Errorf("listen_tls.address: %q is not HOST:PORT (e.g. 10.0.0.5:7443, or :7443 for every address)", l.Address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("listen_tls.address: port %q is not 1..65535", port)
	}
	_ = host
	for _, f := range []struct{ key, path string }{{"cert_file", l.CertFile}, {"key_file", l.KeyFile}, {"client_ca_file", l.ClientCAFile}} {
		if f.path == "" {
			return fmt.Errorf("listen_tls.%s: required when listen_tls.address is set", f.key)
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("listen_tls.%s: %v", f.key, err)
		}
	}
	if err := CheckSecretFile(l.KeyFile); err != nil {
		return fmt.Errorf("listen_tls.key_file: %v", err)
	}
	if _, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile); err != nil {
		return fmt.Errorf("listen_tls.cert_file and key_file do not load as a pair: %v", err)
	}
	if _, err := LoadCAPool(l.ClientCAFile); err != nil {
		return fmt.Errorf("listen_tls.client_ca_file: %v", err)
	}
	names := map[string]int{}
	idents := map[string]int{}
	for i, c := range l.Clients {
		where := fmt.Sprintf("listen_tls.clients[%d]", i)
		if !tlsNameRE(c.Name) {
			return fmt.Errorf("%s.name: %q must be 1 to 64 letters, digits, '-', '_', '.', '@' (and not start with token: or uid:)", where, c.Name)
		}
		if j, dup := names[c.Name]; dup {
			return fmt.Errorf("%s.name: %q is also listen_tls.clients[%d]'s name; each principal needs its own name", where, c.Name, j)
		}
		names[c.Name] = i
		if c.CN == "" && c.URI == "" && c.DNS == "" {
			return fmt.Errorf("%s (%s): give the certificate identity it maps: cn (subject CN), uri (a URI SAN) or dns (a DNS SAN)", where, c.Name)
		}
		if c.SHA256 != "" {
			if p := normalizePin(c.SHA256); len(p) != 64 || strings.Trim(p, "0123456789abcdef") != "" {
				return fmt.Errorf("%s.sha256: %q is not a SHA-256 fingerprint (64 hex digits, colons allowed; `openssl x509 -noout -fingerprint -sha256 -in CERT`)", where, c.SHA256)
			}
		}
		id := c.CN + "\x00" + c.URI + "\x00" + strings.ToLower(c.DNS) + "\x00" + normalizePin(c.SHA256)
		if j, dup := idents[id]; dup {
			return fmt.Errorf("%s (%s): the same certificate identity (%s) as listen_tls.clients[%d] (%s); one certificate maps to one principal", where, c.Name, c.Identity(), j, l.Clients[j].Name)
		}
		idents[id] = i
		switch c.RoleValue() {
		case RoleNone:
			return fmt.Errorf("%s.role: %q is not operator, agent or viewer", where, c.Role)
		case RoleAgent:
			if c.RunAs == "" {
				return fmt.Errorf("%s (%s): an agent needs run_as: the local user its commands run as (as a socket agent's run as its own uid)", where, c.Name)
			}
		case RoleViewer:
			if c.RunAs != "" {
				return fmt.Errorf("%s.run_as: a viewer runs nothing; remove run_as or give the entry another role", where)
			}
		}
		if c.RunAs != "" {
			if _, _, err := LookupRunAs(c.RunAs); err != nil {
				return fmt.Errorf("%s.run_as: %v", where, err)
			}
		}
	}
	return nil
}

// LookupRunAs resolves a user name or numeric uid to its uid and primary gid.
func LookupRunAs(s string) (uid, gid uint32, err error) {
	var u *user.User
	if _, e := strconv.ParseUint(s, 10, 32); e == nil {
		u, err = user.LookupId(s)
	} else {
		u, err = user.Lookup(s)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("no local user %q (create it, or name an existing user)", s)
	}
	a, _ := strconv.ParseUint(u.Uid, 10, 32)
	b, _ := strconv.ParseUint(u.Gid, 10, 32)
	return uint32(a), uint32(b), nil
}

// LoadCAPool reads PEM CA certificates from path.
func LoadCAPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
