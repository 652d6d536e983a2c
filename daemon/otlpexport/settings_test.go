package otlpexport

import (
	"strings"
	"testing"

	"github.com/termd/termd/daemon/config"
)

func TestResolve(t *testing.T) {
	f := false
	cases := []struct {
		name    string
		cfg     config.OTLP
		env     map[string]string
		on      bool
		url     string
		proto   string
		errWant string
	}{
		{name: "nothing set: off", on: false},
		{name: "endpoint in config, http default adds /v1/logs", cfg: config.OTLP{Endpoint: "http://127.0.0.1:4318"}, on: true, url: "http://127.0.0.1:4318/v1/logs", proto: "http/protobuf"},
		{name: "config path kept", cfg: config.OTLP{Endpoint: "https://otel.example:4318/custom/logs"}, on: true, url: "https://otel.example:4318/custom/logs", proto: "http/protobuf"},
		{name: "config grpc", cfg: config.OTLP{Endpoint: "http://127.0.0.1:4317", Protocol: "grpc"}, on: true, url: "http://127.0.0.1:4317", proto: "grpc"},
		{name: "env endpoint turns it on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true, url: "http://c:4318", proto: "http/protobuf"},
		{name: "logs endpoint and protocol win over the general ones", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://general:4318", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://logs:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "grpc"}, on: true, url: "http://logs:4317", proto: "grpc"},
		{name: "config wins over env", cfg: config.OTLP{Endpoint: "http://cfg:4317", Protocol: "grpc"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, on: true, url: "http://cfg:4317", proto: "grpc"},
		{name: "enabled: false wins", cfg: config.OTLP{Enabled: &f}, env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: false},
		{name: "OTEL_SDK_DISABLED", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, on: false},
		{name: "OTEL_LOGS_EXPORTER=none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_LOGS_EXPORTER": "none"}, on: false},
		{name: "bad env endpoint names the variable", env: map[string]string{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "collector:4317"}, errWant: "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"},
		{name: "http/json refused with the way out", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, errWant: "OTEL_EXPORTER_OTLP_PROTOCOL: http/json is not supported"},
		{name: "bad headers named", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "a=b,oops"}, errWant: `OTEL_EXPORTER_OTLP_HEADERS: "oops" is not key=value`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.HostName = "h"
			s, err := Resolve(c.cfg, func(k string) string { return c.env[k] })
			if c.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), c.errWant) {
					t.Fatalf("err = %v, want it to say %q", err, c.errWant)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Enabled != c.on {
				t.Fatalf("enabled = %v (%s), want %v", s.Enabled, s.Why, c.on)
			}
			if c.on && (s.Endpoint != c.url || s.Protocol != c.proto) {
				t.Fatalf("endpoint %q protocol %q, want %q %q", s.Endpoint, s.Protocol, c.url, c.proto)
			}
			if s.Why == "" {
				t.Fatal("no reason given")
			}
		})
	}
}

func TestNextBackoff(t *testing.T) {
	d := nextBackoff(0, 30e9)
	if d <= 0 || d > 250e6 {
		t.Fatalf("first backoff %s", d)
	}
	for i := 0; i < 20; i++ {
		d = nextBackoff(d, 30e9)
	}
	if d > 30e9 || d < 24e9 {
		t.Fatalf("backoff after many failures %s, want near the 30s cap", d)
	}
}
