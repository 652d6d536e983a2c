package doctor

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/termd/termd/daemon/config"
)

// certSoon is how close to its end a certificate is reported as expiring.
const certSoon = 30 * 24 * time.Hour

// tlsChecks look at the mutual-TLS listener: its files exist, the key is
// private, the certificates are valid now and not about to expire, the
// server certificate names the address, the client CA loads, and what the
// client certificates map to.
func tlsChecks(c *config.Config) []Check {
	l := c.ListenTLS
	if !l.Enabled() {
		return []Check{{Area: "tls", Status: OK, Message: "no TCP listener (listen_tls.address is empty): termd is reachable on its unix sockets only"}}
	}
	var cs []Check
	add := func(st Status, msg, fix string) {
		cs = append(cs, Check{Area: "tls", Status: st, Message: msg, Fix: fix})
	}
	for _, f := range []struct{ key, path string }{{"cert_file", l.CertFile}, {"key_file", l.KeyFile}, {"client_ca_file", l.ClientCAFile}} {
		if _, err := os.Stat(f.path); err != nil {
			add(Fail, "listen_tls."+f.key+": "+oneLine(err.Error()), "put the PEM file there (docs/FLEET.md shows how to make it); termd refuses to start without it")
			return cs
		}
	}
	if err := config.CheckSecretFile(l.KeyFile); err != nil {
		add(Fail, "listen_tls.key_file: "+oneLine(err.Error()), "chmod 600 "+l.KeyFile+" and replace the key if others may have read it; termd refuses to start with it")
	} else {
		add(OK, "listen_tls.key_file "+l.KeyFile+" is private (mode 0600 or stricter)", "")
	}
	certs, err := readCerts(l.CertFile)
	if err != nil {
		add(Fail, "listen_tls.cert_file: "+oneLine(err.Error()), "put termd's server certificate (PEM) there")
	} else {
		cs = append(cs, validity("server certificate "+l.CertFile, certs[0]))
		host, _, _ := net.SplitHostPort(l.Address)
		if ip := net.ParseIP(host); host != "" && ip != nil && !ip.IsUnspecified() && !slices.ContainsFunc(certs[0].IPAddresses, ip.Equal) {
			add(Warn, fmt.Sprintf("the server certificate %s has no IP SAN %s: clients dialing tls://%s fail to verify it", l.CertFile, host, l.Address),
				"issue it with the address as an IP SAN, or have clients dial a DNS name it carries (--tls-server-name)")
		}
	}
	cas, err := readCerts(l.ClientCAFile)
	if err != nil {
		add(Fail, "listen_tls.client_ca_file: "+oneLine(err.Error()), "put the CA certificate(s) that sign client certificates (PEM) there")
	} else {
		for _, ca := range cas {
			cs = append(cs, validity("client CA "+ca.Subject.String(), ca))
		}
	}
	roles := map[string][]string{}
	for _, e := range l.Clients {
		w := e.Name
		if e.Gateway {
			w += " (gateway)"
		}
		if e.RunAs != "" {
			w += " as " + e.RunAs
		}
		roles[e.Role] = append(roles[e.Role], w)
	}
	var parts []string
	for _, r := range []string{"operator", "agent", "viewer"} {
		if len(roles[r]) > 0 {
			parts = append(parts, r+": "+strings.Join(roles[r], ", "))
		}
	}
	if len(parts) == 0 {
		add(Warn, "listening on "+l.Address+" with mutual TLS, but listen_tls.clients is empty: every certificate is refused", "map client certificates to principals in listen_tls.clients")
	} else {
		add(OK, "listening on "+l.Address+" with mutual TLS (TLS 1.3, client certificate required); certificates map to "+strings.Join(parts, "; "), "")
	}
	return cs
}

// validity reports whether a certificate is valid now and for how long.
func validity(what string, c *x509.Certificate) Check {
	now := time.Now()
	switch {
	case now.Before(c.NotBefore):
		return Check{Area: "tls", Status: Fail, Message: fmt.Sprintf("%s is not valid before %s", what, c.NotBefore.Format(time.RFC3339)), Fix: "check the clock, or issue a certificate valid now"}
	case now.After(c.NotAfter):
		return Check{Area: "tls", Status: Fail, Message: fmt.Sprintf("%s expired on %s: every handshake fails", what, c.NotAfter.Format(time.RFC3339)), Fix: "issue a new one and reload termd (SIGHUP)"}
	case c.NotAfter.Sub(now) < certSoon:
		return Check{Area: "tls", Status: Warn, Message: fmt.Sprintf("%s expires on %s (in %d days)", what, c.NotAfter.Format(time.RFC3339), int(c.NotAfter.Sub(now).Hours()/24)), Fix: "issue a new one and reload termd (SIGHUP) before then"}
	}
	return Check{Area: "tls", Status: OK, Message: fmt.Sprintf("%s is valid until %s", what, c.NotAfter.Format(time.RFC3339))}
}

// readCerts parses every certificate in a PEM file.
func readCerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return out, nil
}
