package config

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/termd/termd/internal/testpki"
)

// listen_tls is checked at load: files present and loadable, the key
// private, every client entry complete (an agent has run_as) and distinct.
func TestListenTLSValidation(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.MustCA("ca")
	srv, err := ca.Server("termd", []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	f, err := srv.WriteAll(dir, "server", ca)
	if err != nil {
		t.Fatal(err)
	}
	base := func() ListenTLS {
		return ListenTLS{Address: "127.0.0.1:7443", CertFile: f.Cert, KeyFile: f.Key, ClientCAFile: f.CA,
			Clients: []TLSClient{{Name: "ops", CN: "ops", Role: "operator"}, {Name: "ci", URI: "spiffe://fleet/ci", Role: "agent", RunAs: "root"}}}
	}
	if err := base().validate(); err != nil {
		t.Fatalf("a good section: %v", err)
	}
	if err := (ListenTLS{}).validate(); err != nil {
		t.Fatalf("no section: %v", err)
	}
	cases := []struct {
		name string
		mod  func(l *ListenTLS)
		want string
	}{
		{"files without address", func(l *ListenTLS) { l.Address = "" }, "address is empty"},
		{"bad address", func(l *ListenTLS) { l.Address = "7443" }, "HOST:PORT"},
		{"missing cert", func(l *ListenTLS) { l.CertFile = dir + "/nope.crt" }, "listen_tls.cert_file"},
		{"no client CA", func(l *ListenTLS) { l.ClientCAFile = "" }, "listen_tls.client_ca_file: required"},
		{"CA not PEM", func(l *ListenTLS) { l.ClientCAFile = f.Key }, "client_ca_file"},
		{"agent without run_as", func(l *ListenTLS) { l.Clients[1].RunAs = "" }, "needs run_as"},
		{"unknown run_as", func(l *ListenTLS) { l.Clients[1].RunAs = "no-such-user-x" }, "no local user"},
		{"duplicate identity", func(l *ListenTLS) { l.Clients = append(l.Clients, TLSClient{Name: "ops2", CN: "ops", Role: "viewer"}) }, "same certificate identity"},
		{"duplicate name", func(l *ListenTLS) { l.Clients[1].Name = "ops" }, "also listen_tls.clients[0]"},
		{"no identity", func(l *ListenTLS) { l.Clients[0].CN = "" }, "cn (subject CN)"},
		{"bad role", func(l *ListenTLS) { l.Clients[0].Role = "admin" }, "not operator, agent or viewer"},
		{"bad pin", func(l *ListenTLS) { l.Clients[0].SHA256 = "abc" }, "SHA-256 fingerprint"},
		{"token name", func(l *ListenTLS) { l.Clients[0].Name = "token:x" }, ".name"},
	}
	for _, c := range cases {
		l := base()
		c.mod(&l)
		if err := l.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if err := os.Chmod(f.Key, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := base().validate(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a group-readable key: %v", err)
	}
}

// A verified certificate maps to the one entry whose identity fields (and
// pin) all match; none or several is an error naming the certificate.
func TestListenTLSClientFor(t *testing.T) {
	ca := testpki.MustCA("ca")
	c, err := ca.Client("ci", "spiffe://fleet/ci")
	if err != nil {
		t.Fatal(err)
	}
	l := ListenTLS{Clients: []TLSClient{
		{Name: "pinned-other", CN: "ci", SHA256: strings.Repeat("ab", 32), Role: "agent"},
		{Name: "ci", CN: "ci", URI: "spiffe://fleet/ci", SHA256: strings.ToUpper(c.Fingerprint()), Role: "agent"},
		{Name: "wrong-uri", CN: "ci", URI: "spiffe://fleet/other", Role: "operator"},
	}}
	got, err := l.ClientFor(c.Cert)
	if err != nil || got.Name != "ci" {
		t.Fatalf("ClientFor: %v %v", got.Name, err)
	}
	l.Clients = append(l.Clients, TLSClient{Name: "any-ci", CN: "ci", Role: "viewer"})
	if _, err := l.ClientFor(c.Cert); err == nil || !strings.Contains(err.Error(), "more than one") {
		t.Fatalf("two matching entries: %v", err)
	}
	l.Clients = nil
	if _, err := l.ClientFor(c.Cert); err == nil || !strings.Contains(err.Error(), "CN=ci") || !strings.Contains(err.Error(), "listen_tls.clients") {
		t.Fatalf("no entry: %v", err)
	}
}
