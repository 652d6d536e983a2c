package config

import (
	"strings"
	"testing"
)

func TestEgressConfig(t *testing.T) {
	c := Default()
	if err := Parse(c, []byte("egress:\n  allow_lists:\n    mirrors: [mirror.corp.example, '*.cdn.example:*']\n    registries: [registry.npmjs.org]\n  hosts:\n    registry.test: 127.0.0.1\n")); err != nil {
		t.Fatal(err)
	}
	lists, err := c.EgressLists()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lists["registries"].Hosts(), " "); got != "registry.npmjs.org" {
		t.Errorf("a configured list replaces the built-in of its name; registries = %s", got)
	}
	if lists["mirrors"] == nil || lists["mirrors"].CheckName("a.cdn.example", 9) != "" {
		t.Errorf("mirrors list not loaded: %v", lists["mirrors"])
	}
	hosts, err := c.EgressHosts()
	if err != nil || hosts["registry.test"].String() != "127.0.0.1" {
		t.Errorf("hosts %v %v", hosts, err)
	}
	if l, _ := Default().EgressLists(); l["registries"] == nil || l["registries"].CheckName("proxy.golang.org", 443) != "" {
		t.Error("the built-in registries list is missing")
	}
	for yaml, want := range map[string]string{
		"egress:\n  allow_lists:\n    x: ['https://a.example']\n": `egress.allow_lists: egress allow-list "x" entry 1`,
		"egress:\n  hosts:\n    a.test: not-an-ip\n":              `egress.hosts: a.test: "not-an-ip" is not an IP address`,
		"egress:\n  hosts:\n    '*.a.test': 10.0.0.1\n":           `egress.hosts: "*.a.test" is not a host name`,
		"egress:\n  max_connections: 0\n":                         "egress.max_connections: 0 is out of range",
	} {
		err := parseAndValidate(t, yaml)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", yaml, err, want)
		}
	}
}
