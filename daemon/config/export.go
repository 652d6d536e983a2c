package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// OTLP protocols the exporter speaks (OTEL_EXPORTER_OTLP_PROTOCOL values).
const (
	OTLPGRPC = "grpc"
	OTLPHTTP = "http/protobuf"
)

// CheckOTLPProtocol refuses a protocol the exporter does not speak; key
// names where it came from (a config key or an environment variable).
func CheckOTLPProtocol(key, v string) error {
	switch v {
	case OTLPGRPC, OTLPHTTP:
		return nil
	case "http/json":
		return fmt.Errorf("%s: http/json is not supported by the OpenTelemetry Go SDK; use http/protobuf (port 4318) or grpc (port 4317)", key)
	}
	return fmt.Errorf("%s: %q is not grpc or http/protobuf", key, v)
}

// CheckOTLPEndpoint refuses an endpoint that is not an http(s) URL with a
// host; key names where it came from.
func CheckOTLPEndpoint(key, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an http:// or https:// URL with a host (e.g. http://127.0.0.1:4317 for grpc, http://127.0.0.1:4318 for http/protobuf)", key, v)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%s: %q must not carry a query, fragment or user info (put credentials in headers)", key, v)
	}
	return nil
}

func (o OTLP) validate(source string) error {
	if o.Endpoint != "" {
		if err := CheckOTLPEndpoint("export.otlp.endpoint", o.Endpoint); err != nil {
			return err
		}
	}
	if o.Protocol != "" {
		if err := CheckOTLPProtocol("export.otlp.protocol", o.Protocol); err != nil {
			return err
		}
	}
	for k := range o.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return fmt.Errorf("export.otlp.headers: %q is not a header name", k)
		}
	}
	if len(o.Headers) > 0 && source != "" {
		// Headers usually carry a token: the file holding them is a secret.
		if err := CheckSecretFile(source); err != nil {
			return fmt.Errorf("export.otlp.headers: %v (or put them in OTEL_EXPORTER_OTLP_HEADERS in termd's environment)", err)
		}
	}
	for _, f := range []struct{ key, path string }{{"ca_file", o.CAFile}, {"cert_file", o.CertFile}, {"key_file", o.KeyFile}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			return fmt.Errorf("export.otlp.%s: %q must be an absolute path", f.key, f.path)
		}
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return fmt.Errorf("export.otlp: cert_file and key_file go together (set both for a client certificate, or neither)")
	}
	if o.KeyFile != "" {
		if err := CheckSecretFile(o.KeyFile); err != nil {
			return fmt.Errorf("export.otlp.key_file: %v", err)
		}
	}
	if d := o.Timeout.D(); d < 100*time.Millisecond || d > 10*time.Minute {
		return fmt.Errorf("export.otlp.timeout: %s is out of range 100ms..10m", d)
	}
	if d := o.MaxBackoff.D(); d < time.Second || d > time.Hour {
		return fmt.Errorf("export.otlp.max_backoff: %s is out of range 1s..1h", d)
	}
	if o.Batch < 1 || o.Batch > 10000 {
		return fmt.Errorf("export.otlp.batch: %d is out of range 1..10000", o.Batch)
	}
	return nil
}
