package client

import "testing"

func TestSandboxWordsNamesTheNetworkMode(t *testing.T) {
	for _, c := range []struct {
		mode    string
		network bool
		want    string
	}{
		{"none", false, "read-only, no network (full enforcement)"},
		{"workspace-loopback", false, "read-only, workspace loopback (full enforcement)"},
		{"host", true, "read-only, host network (full enforcement)"},
		{"egress:registries", true, "read-only, egress through registries (full enforcement)"},
		{"", true, "read-only, network (full enforcement)"},
		{"", false, "read-only, no network (full enforcement)"},
	} {
		if got := SandboxWords("read-only", c.mode, c.network, "full"); got != c.want {
			t.Errorf("SandboxWords(%q, %v) = %q, want %q", c.mode, c.network, got, c.want)
		}
	}
	if got := SandboxWords("", "host", true, "full"); got != "" {
		t.Errorf("no profile: %q, want empty", got)
	}
}
