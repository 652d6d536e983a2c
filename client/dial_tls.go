package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// TLSScheme starts a target that is a termd's mutual-TLS listener.
const TLSScheme = "tls://"

// TLS names the PEM files of a mutual-TLS connection to a termd that listens
// on TCP (its config's listen_tls).
type TLS struct {
	// CertFile and KeyFile are this client's certificate and private key;
	// termd maps the certificate to a principal (listen_tls.clients).
	CertFile, KeyFile string
	// CAFile holds the CA certificate(s) that signed termd's server
	// certificate.
	CAFile string
	// ServerName is the name termd's certificate must carry (a DNS or IP
	// SAN); empty: the host of the target.
	ServerName string
}

// IsTLSTarget says whether target names a mutual-TLS listener (tls://HOST:PORT).
func IsTLSTarget(target string) bool { return strings.HasPrefix(target, TLSScheme) }

// TLSAddress is the HOST:PORT of a target ("tls://h:p" or "h:p").
func TLSAddress(target string) string { return strings.TrimPrefix(target, TLSScheme) }

// Config loads the files into a client tls.Config (TLS 1.3 only, as termd's
// listener accepts), for serverName (the host of the address when t.ServerName is empty).
func (t *TLS) Config(addr string) (*tls.Config, error) {
	if t == nil || t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
		return nil, errors.New("a tls:// target needs a client certificate, its key and the CA of termd's server certificate: pass --tls-cert, --tls-key and --tls-ca (or TERMD_TLS_CERT, TERMD_TLS_KEY, TERMD_TLS_CA)")
	}
	pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate %s with key %s: %w", t.CertFile, t.KeyFile, err)
	}
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", t.CAFile)
	}
	name := t.ServerName
	if name == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("termd address %q: want HOST:PORT (e.g. tls://10.0.0.5:7443)", addr)
		}
		name = host
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
		ServerName:   name,
	}, nil
}

// dialTLS connects to a termd's mutual-TLS listener at target
// ("tls://HOST:PORT", or "HOST:PORT" with o.TLS set) with o.TLS's files.
// Like Dial it does not wait: the first call fails with a clear error when
// the handshake does.
func dialTLS(target string, o Options) (*Client, error) {
	addr := TLSAddress(target)
	label := TLSScheme + addr
	if _, _, err := net.SplitHostPort(addr); err != nil || addr == "" {
		return nil, fmt.Errorf("termd address %q: want tls://HOST:PORT (e.g. tls://10.0.0.5:7443)", target)
	}
	cfg, err := o.TLS.Config(addr)
	if err != nil {
		return nil, err
	}
	tlsConfigs.Store(label, cfg)
	return newClient("passthrough:///"+addr, label, o,
		grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		// A host cut off is noticed within about 40s even when no call
		// is in flight (termd permits pings every 10s).
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	)
}

// wrapTLS words a failure of a call to a termd over mutual TLS.
func wrapTLS(target string, st *status.Status, e *Error) error {
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		if !transportFailure(msg) && !strings.Contains(msg, "tls:") && !strings.Contains(msg, "broken pipe") {
			break
		}
		if why, ok := tlsRefusal(target); ok {
			msg = why // what termd said in its TLS alert, which gRPC may not pass on
		}
		switch {
		case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"), strings.Contains(msg, "certificate unknown"):
			// termd refused this client's certificate during the handshake.
			e.Code = codes.Unauthenticated
			e.Message = "termd at " + target + " refused this client's certificate in the TLS handshake: " + msg
			e.Hint = "use a client certificate signed by the CA in termd's listen_tls.client_ca_file (--tls-cert, --tls-key)"
		case strings.Contains(msg, "x509:"), strings.Contains(msg, "certificate"):
			e.Message = "termd's server certificate at " + target + " did not verify: " + msg
			e.Hint = "--tls-ca must hold the CA that signed termd's listen_tls.cert_file, and the certificate must name the host you dial (or pass --tls-server-name)"
		default:
			e.Message = "termd is not reachable at " + target + ": " + msg
			e.Hint = "check that termd there has listen_tls.address set to this address and that the network lets you reach it"
		}
	default:
		e.Hint = codeHints[st.Code()].tls
	}
	return e
}

// tlsConfigs are the client TLS configurations by target label, for
// tlsRefusal.
var tlsConfigs sync.Map

// tlsRefusal asks termd, on a connection of its own, why it refuses this
// client's handshake: in TLS 1.3 the client's handshake completes before
// termd checks its certificate, so gRPC often reports only a broken pipe,
// while termd's alert ("certificate required", "unknown certificate
// authority") says why. Used only after a call has failed to connect.
func tlsRefusal(target string) (string, bool) {
	v, ok := tlsConfigs.Load(target)
	if !ok {
		return "", false
	}
	cfg := v.(*tls.Config).Clone()
	cfg.NextProtos = []string{"h2"}
	d := &net.Dialer{Timeout: time.Second}
	c, err := tls.DialWithDialer(d, "tcp", TLSAddress(target), cfg)
	if err != nil {
		return err.Error(), true
	}
	defer c.Close()
	// Read only: writing to a connection termd has closed could make the
	// kernel discard its alert (a reset) before it is read.
	_ = c.SetDeadline(time.Now().Add(time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil && strings.Contains(err.Error(), "tls:") {
		return err.Error(), true
	}
	return "", false
}
