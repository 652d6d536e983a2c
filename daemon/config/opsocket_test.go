package config

import (
	"strings"
	"testing"
)

// operator_socket defaults to beside the socket, none turns it off, and a
// relative path or the socket itself is refused naming the key;
// private_paths must be absolute.
func TestOperatorSocketAndPrivatePaths(t *testing.T) {
	load := func(y string) (*Config, error) {
		c := Default()
		if err := Parse(c, []byte("socket: /run/t/termd.sock\nstate_dir: /tmp/termd-state\nworkspaces: [/tmp]\n"+y)); err != nil {
			return nil, err
		}
		if err := c.ApplyDefaults(); err != nil {
			return nil, err
		}
		return c, c.Validate()
	}
	c, err := load("")
	if err != nil || c.OperatorSocket != "/run/t/termd-operator.sock" {
		t.Fatalf("default operator_socket: %q %v", c.OperatorSocket, err)
	}
	if c, err = load("operator_socket: none\n"); err != nil || c.OperatorSocket != "" {
		t.Fatalf("operator_socket: none: %q %v", c.OperatorSocket, err)
	}
	for y, want := range map[string]string{
		"operator_socket: op.sock\n":               "operator_socket",
		"operator_socket: /run/t/termd.sock\n":     "the socket itself",
		"private_paths: [/x/.run, rel/gw.token]\n": "private_paths[1]",
		"connections:\n  accept_rate: 0\n":         "connections.accept_rate",
	} {
		if _, err := load(y); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error naming %s", y, err, want)
		}
	}
}
