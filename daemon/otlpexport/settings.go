package otlpexport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/termd/termd/daemon/config"
)

// Settings are the exporter's resolved settings: the config's export.otlp
// section over the standard OTEL_EXPORTER_OTLP_* environment variables.
type Settings struct {
	// Enabled says whether receipts are exported; Why says what decided it
	// (for logs and termd doctor).
	Enabled bool
	Why     string
	// Endpoint and EndpointFrom: the URL exported to and where it came from
	// (a config key or an environment variable).
	Endpoint, EndpointFrom string
	Protocol, ProtocolFrom string
	HostName               string

	cfg config.OTLP
	// fromConfig: the endpoint is the config's; a URL without a path gets
	// /v1/logs for http/protobuf (the environment variables follow the SDK's
	// own rules).
	fromConfig bool
}

// Resolve reads the config section and the environment (getenv, normally
// os.Getenv). A value that is set but wrong is an error naming it: termd
// refuses to start rather than export nowhere.
func Resolve(c config.OTLP, getenv func(string) string) (Settings, error) {
	s := Settings{cfg: c}
	s.HostName = c.HostName
	if s.HostName == "" {
		h, err := os.Hostname()
		if err != nil {
			return s, fmt.Errorf("export.otlp: the host name is unknown (%v): set export.otlp.host_name", err)
		}
		s.HostName = h
	}
	switch {
	case c.Endpoint != "":
		s.Endpoint, s.EndpointFrom, s.fromConfig = c.Endpoint, "export.otlp.endpoint", true
	case getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") != "":
		s.Endpoint, s.EndpointFrom = getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"), "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
	case getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		s.Endpoint, s.EndpointFrom = getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "OTEL_EXPORTER_OTLP_ENDPOINT"
	}
	switch {
	case c.Protocol != "":
		s.Protocol, s.ProtocolFrom = c.Protocol, "export.otlp.protocol"
	case getenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL") != "":
		s.Protocol, s.ProtocolFrom = getenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"), "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"
	case getenv("OTEL_EXPORTER_OTLP_PROTOCOL") != "":
		s.Protocol, s.ProtocolFrom = getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
	default:
		s.Protocol, s.ProtocolFrom = config.OTLPHTTP, "the OpenTelemetry default"
	}
	switch {
	case c.Enabled != nil && !*c.Enabled:
		s.Why = "off: export.otlp.enabled is false"
		return s, nil
	case s.Endpoint == "":
		s.Why = "off: no endpoint (set export.otlp.endpoint, or OTEL_EXPORTER_OTLP_ENDPOINT in termd's environment)"
		return s, nil
	case strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true"):
		s.Why = "off: OTEL_SDK_DISABLED=true"
		return s, nil
	}
	if v := getenv("OTEL_LOGS_EXPORTER"); v != "" && v != "otlp" && !s.fromConfig {
		s.Why = "off: OTEL_LOGS_EXPORTER=" + v
		return s, nil
	}
	if err := config.CheckOTLPEndpoint(s.EndpointFrom, s.Endpoint); err != nil {
		return s, err
	}
	if err := config.CheckOTLPProtocol(s.ProtocolFrom, s.Protocol); err != nil {
		return s, err
	}
	if len(c.Headers) == 0 {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"} {
			if err := checkHeaders(k, getenv(k)); err != nil {
				return s, err
			}
		}
	}
	if s.fromConfig && s.Protocol == config.OTLPHTTP {
		if u, _ := url.Parse(s.Endpoint); u.Path == "" || u.Path == "/" {
			u.Path = "/v1/logs"
			s.Endpoint = u.String()
		}
	}
	s.Enabled = true
	s.Why = fmt.Sprintf("on: %s to %s (endpoint from %s, protocol from %s)", s.Protocol, s.Endpoint, s.EndpointFrom, s.ProtocolFrom)
	return s, nil
}

// checkHeaders refuses an OTEL_EXPORTER_OTLP_HEADERS value the SDK would
// silently drop parts of: key=value pairs separated by commas.
func checkHeaders(key, v string) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	for _, kv := range strings.Split(v, ",") {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%s: %q is not key=value (write e.g. authorization=Bearer%%20TOKEN,x-team=ops, values URL-encoded)", key, strings.TrimSpace(kv))
		}
	}
	return nil
}

// tlsConfig is the config's TLS files as a client configuration, or nil
// when the config names none (then the SDK reads OTEL_EXPORTER_OTLP_CERTIFICATE
// and friends, and the endpoint's scheme decides plain or TLS).
func (s Settings) tlsConfig() (*tls.Config, error) {
	c := s.cfg
	if c.CAFile == "" && c.CertFile == "" {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("export.otlp.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("export.otlp.ca_file: %s holds no PEM certificate", c.CAFile)
		}
		t.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("export.otlp.cert_file/key_file: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

func (s Settings) timeout() time.Duration {
	if d := s.cfg.Timeout.D(); d > 0 {
		return d
	}
	return 10 * time.Second
}

func (s Settings) batch() int {
	if s.cfg.Batch > 0 {
		return s.cfg.Batch
	}
	return 256
}

func (s Settings) maxBackoff() time.Duration {
	if d := s.cfg.MaxBackoff.D(); d > 0 {
		return d
	}
	return 30 * time.Second
}
