package client

import "strings"

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
