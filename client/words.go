package client

import (
	"errors"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// SandboxWords is a plan's sandbox profile in one line, the same in termctl
// and the MCP bridge, e.g. "workspace-write, workspace loopback (full
// enforcement)". networkMode is the decided network mode (none,
// workspace-loopback, host, egress:NAME); when it is empty (an older daemon)
// the network flag alone decides between "network" and "no network".
func SandboxWords(profile, networkMode string, network bool, enforcement string) string {
	if profile == "" {
		return ""
	}
	s := profile + ", " + networkWords(networkMode, network)
	if enforcement != "" {
		s += " (" + enforcement + " enforcement)"
	}
	return s
}

func networkWords(mode string, network bool) string {
	switch {
	case mode == "none":
		return "no network"
	case mode == "workspace-loopback":
		return "workspace loopback"
	case mode == "host":
		return "host network"
	case strings.HasPrefix(mode, "egress:"):
		return "egress through " + strings.TrimPrefix(mode, "egress:")
	case mode != "":
		return "network " + mode
	case network:
		return "network"
	}
	return "no network"
}

// ParseWhen reads a time filter the way termctl's --since, --until and
// --before and terminal_history's since and until take it: a duration ago
// (24h), or a time (RFC 3339, or 2006-01-02 15:04:05 or 2006-01-02 in the
// local time zone). Empty is no filter (nil). The caller names the flag or
// argument in its error.
func ParseWhen(s string) (*timestamppb.Timestamp, error) {
	if s == "" {
		return nil, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return timestamppb.New(time.Now().Add(-d)), nil
	}
	for _, layout := range []string{time.RFC3339, time.DateTime, time.DateOnly} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return timestamppb.New(t), nil
		}
	}
	return nil, errors.New("neither a duration ago (24h) nor a time (2006-01-02, 2006-01-02 15:04:05, RFC 3339)")
}
