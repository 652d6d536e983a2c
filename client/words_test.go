package client

import (
	"strings"
	"testing"
	"time"
)

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

// ParseWhen takes what termctl's --since/--until/--before and
// terminal_history's since/until take: a duration ago or a time.
func TestParseWhen(t *testing.T) {
	if ts, err := ParseWhen(""); ts != nil || err != nil {
		t.Errorf(`ParseWhen("") = %v, %v; want no filter`, ts, err)
	}
	before := time.Now()
	ts, err := ParseWhen("24h")
	after := time.Now()
	if err != nil || ts.AsTime().Before(before.Add(-24*time.Hour)) || ts.AsTime().After(after.Add(-24*time.Hour)) {
		t.Errorf(`ParseWhen("24h") = %v, %v; want a day ago`, ts, err)
	}
	for s, want := range map[string]time.Time{
		"2026-01-02T15:04:05Z": time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		"2026-01-02 15:04:05":  time.Date(2026, 1, 2, 15, 4, 5, 0, time.Local),
		"2026-01-02":           time.Date(2026, 1, 2, 0, 0, 0, 0, time.Local),
	} {
		if ts, err := ParseWhen(s); err != nil || !ts.AsTime().Equal(want) {
			t.Errorf("ParseWhen(%q) = %v, %v; want %v", s, ts, err, want)
		}
	}
	if _, err := ParseWhen("yesterday"); err == nil || !strings.Contains(err.Error(), "2006-01-02") {
		t.Errorf(`ParseWhen("yesterday") = %v; want an error naming the forms`, err)
	}
}
