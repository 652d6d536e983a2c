package cli

import (
	"encoding/json"
	"testing"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// `policy check -o json` prints the sandbox profile and the steps with the
// daemon's own types (internal/policyjson); the JSON is byte for byte what
// its own copies of them printed (legacySandbox, legacyStep: their
// definitions as they were), and the profile's cache directories, which
// the daemon's type has and the old output did not, stay out.
func TestPolicyCheckJSONUnchangedByTheSharedTypes(t *testing.T) {
	type legacySandbox struct {
		Profile     string   `json:"profile"`
		Network     bool     `json:"network"`
		NetworkMode string   `json:"network_mode,omitempty"`
		Exec        []string `json:"exec,omitempty"`
		Read        []string `json:"read,omitempty"`
		Write       []string `json:"write,omitempty"`
		Enforcement string   `json:"enforcement"`
	}
	type legacyStep struct {
		Name    string `json:"name"`
		Outcome string `json:"outcome"`
		Detail  string `json:"detail,omitempty"`
	}
	for _, sb := range []*termdv1.SandboxProfile{
		{Profile: "read-only", Exec: []string{"/usr/bin/ls"}, Enforcement: "full", NetworkMode: "workspace-loopback"},
		{Profile: "workspace-write", Network: true, NetworkMode: "host", Read: []string{"/etc/x"}, Write: []string{"/tmp/y"}, Cache: []string{"~/.cache/go-build"}, Enforcement: "partial"},
		{Profile: "read-only"},
	} {
		steps := []*termdv1.PolicyStep{{Name: "mode", Outcome: "confirm", Detail: "timeout 10m0s"}, {Name: "verdict", Outcome: "allow"}}
		out := checkOutput(&termdv1.CheckPolicyResponse{Decision: &termdv1.Decision{Sandbox: sb, Steps: steps}})
		got, _ := json.Marshal(out.Sandbox)
		want, _ := json.Marshal(legacySandbox{Profile: sb.Profile, Network: sb.Network, NetworkMode: sb.NetworkMode, Exec: sb.Exec, Read: sb.Read, Write: sb.Write, Enforcement: sb.Enforcement})
		if string(got) != string(want) {
			t.Errorf("sandbox JSON changed:\n now    %s\n before %s", got, want)
		}
		got, _ = json.Marshal(out.Steps)
		want, _ = json.Marshal([]legacyStep{{"mode", "confirm", "timeout 10m0s"}, {"verdict", "allow", ""}})
		if string(got) != string(want) {
			t.Errorf("steps JSON changed:\n now    %s\n before %s", got, want)
		}
	}
}
