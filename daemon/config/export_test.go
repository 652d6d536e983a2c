package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOTLPExportIsValidated(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "termd.yaml")
	if err := os.WriteFile(loose, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ yaml, source, want string }{
		{"export:\n  otlp:\n    endpoint: collector:4317\n", "", `export.otlp.endpoint: "collector:4317" is not an http:// or https:// URL`},
		{"export:\n  otlp:\n    endpoint: http://u:p@c:4318\n", "", "put credentials in headers"},
		{"export:\n  otlp:\n    protocol: http/json\n", "", "http/json is not supported by the OpenTelemetry Go SDK; use http/protobuf"},
		{"export:\n  otlp:\n    protocol: udp\n", "", `export.otlp.protocol: "udp" is not grpc or http/protobuf`},
		{"export:\n  otlp:\n    cert_file: /etc/termd/c.pem\n", "", "cert_file and key_file go together"},
		{"export:\n  otlp:\n    ca_file: ca.pem\n", "", "export.otlp.ca_file: \"ca.pem\" must be an absolute path"},
		{"export:\n  otlp:\n    batch: 0\n", "", "export.otlp.batch: 0 is out of range"},
		{"export:\n  otlp:\n    max_backoff: 10ms\n", "", "export.otlp.max_backoff"},
		{"export:\n  otlp:\n    headers: {authorization: Bearer x}\n", loose, "chmod 600 " + loose},
		{"export:\n  otlp:\n    endpiont: http://c:4318\n", "", `did you mean "endpoint"`},
	} {
		cfg := Default()
		err := Parse(cfg, []byte(c.yaml))
		if err == nil {
			cfg.Source = c.source
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.yaml, err, c.want)
		}
	}
	cfg := Default()
	if err := Parse(cfg, []byte("export:\n  otlp:\n    endpoint: https://otel.example:4317\n    protocol: grpc\n    headers: {authorization: Bearer x}\n")); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a good export section was refused: %v", err)
	}
}
