package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
)

// Issued certificates verify against their CA and not against another, carry
// their SANs, and their keys are written 0600.
func TestIssueVerifyWrite(t *testing.T) {
	ca, other := MustCA("test CA"), MustCA("other CA")
	srv, err := ca.Server("termd-a", []net.IP{net.ParseIP("127.0.0.1")}, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ca.Client("agent-a", "spiffe://fleet/agent-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "host-a"}); err != nil {
		t.Fatalf("server cert does not verify: %v", err)
	}
	if _, err := cl.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client cert does not verify: %v", err)
	}
	if _, err := cl.Cert.Verify(x509.VerifyOptions{Roots: other.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Fatal("client cert verified against another CA")
	}
	if len(cl.Cert.URIs) != 1 || cl.Cert.URIs[0].String() != "spiffe://fleet/agent-a" || cl.Cert.Subject.CommonName != "agent-a" {
		t.Fatalf("client identity: %v %v", cl.Cert.Subject, cl.Cert.URIs)
	}
	if len(cl.Fingerprint()) != 64 {
		t.Fatalf("fingerprint %q", cl.Fingerprint())
	}
	dir := t.TempDir()
	f, err := cl.WriteAll(dir, "agent-a", ca)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(f.Key)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key %s: %v %v", f.Key, st.Mode(), err)
	}
	if _, err := tls.LoadX509KeyPair(f.Cert, f.Key); err != nil {
		t.Fatalf("written pair does not load: %v", err)
	}
}
