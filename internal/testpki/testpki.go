// Package testpki makes small certificate authorities and certificates for
// tests of termd's mutual-TLS listener and clients: a CA, server certificates
// with IP and DNS subject alternative names, client certificates with a
// subject CN and URI or DNS SANs, written as PEM files (keys 0600).
//
// It is test support: keys are ECDSA P-256, validity is fixed relative to
// now, and nothing here is meant for production certificates (docs/FLEET.md
// shows how to make those with openssl or step).
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	DER  []byte
}

// Cert is a certificate issued by a CA, with its private key.
type Cert struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	DER  []byte
}

// Options shape an issued certificate. Zero values give a certificate valid
// from an hour ago for a year (a CA: ten years).
type Options struct {
	NotBefore, NotAfter time.Time
	IPs                 []net.IP
	DNS                 []string
	URIs                []string
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

// NewCA makes a CA whose subject CN is cn.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: c, Key: key, DER: der}, nil
}

// MustCA is NewCA for tests: it panics on error (which only a broken
// crypto/rand causes).
func MustCA(cn string) *CA {
	ca, err := NewCA(cn)
	if err != nil {
		panic(err)
	}
	return ca
}

func (ca *CA) issue(cn string, usage x509.ExtKeyUsage, o Options) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(365 * 24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  o.IPs,
		DNSNames:     o.DNS,
	}
	for _, s := range o.URIs {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("URI SAN %q: %w", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Cert{Cert: c, Key: key, DER: der}, nil
}

// Server issues a server certificate for cn with the given IP and DNS SANs.
func (ca *CA) Server(cn string, ips []net.IP, dns ...string) (*Cert, error) {
	return ca.issue(cn, x509.ExtKeyUsageServerAuth, Options{IPs: ips, DNS: dns})
}

// Client issues a client certificate with subject CN cn and the given URI
// SANs (e.g. "spiffe://fleet/agent-a").
func (ca *CA) Client(cn string, uris ...string) (*Cert, error) {
	return ca.issue(cn, x509.ExtKeyUsageClientAuth, Options{URIs: uris})
}

// ClientWith issues a client certificate with full options (validity, DNS SANs).
func (ca *CA) ClientWith(cn string, o Options) (*Cert, error) {
	return ca.issue(cn, x509.ExtKeyUsageClientAuth, o)
}

// ServerWith issues a server certificate with full options.
func (ca *CA) ServerWith(cn string, o Options) (*Cert, error) {
	return ca.issue(cn, x509.ExtKeyUsageServerAuth, o)
}

// CertPEM is the CA certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})
}

// Pool is a cert pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCert writes the CA certificate to path (0644).
func (ca *CA) WriteCert(path string) error {
	return os.WriteFile(path, ca.CertPEM(), 0o644)
}

// CertPEM is the certificate in PEM.
func (c *Cert) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.DER})
}

// KeyPEM is the private key in PEM (PKCS#8).
func (c *Cert) KeyPEM() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// Fingerprint is the SHA-256 of the certificate's DER, in lower-case hex
// (the form termd's config takes for a fingerprint pin).
func (c *Cert) Fingerprint() string {
	sum := sha256.Sum256(c.DER)
	return hex.EncodeToString(sum[:])
}

// TLS is the certificate as a tls.Certificate.
func (c *Cert) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.DER}, PrivateKey: c.Key, Leaf: c.Cert}
}

// Write writes dir/name.crt (0644) and dir/name.key (0600) and returns
// their paths.
func (c *Cert) Write(dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, c.CertPEM(), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, c.KeyPEM(), 0o600); err != nil {
		return "", "", err
	}
	// WriteFile keeps the mode of a file that exists: make sure.
	if err := os.Chmod(keyFile, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// Files are the PEM files of one party: its certificate, key, and the CA
// certificate it trusts.
type Files struct {
	Cert, Key, CA string
}

// WriteAll writes c and the CA that is to verify its peer into dir as
// name.crt, name.key and name-ca.crt.
func (c *Cert) WriteAll(dir, name string, trust *CA) (Files, error) {
	cf, kf, err := c.Write(dir, name)
	if err != nil {
		return Files{}, err
	}
	caf := filepath.Join(dir, name+"-ca.crt")
	if err := trust.WriteCert(caf); err != nil {
		return Files{}, err
	}
	return Files{Cert: cf, Key: kf, CA: caf}, nil
}
