package client

// SandboxWords is a plan's sandbox profile in one line, the same in termctl
// and the MCP bridge, e.g. "workspace-write, no network (full enforcement)".
func SandboxWords(profile string, network bool, enforcement string) string {
	if profile == "" {
		return ""
	}
	s := profile + ", no network"
	if network {
		s = profile + ", network"
	}
	if enforcement != "" {
		s += " (" + enforcement + " enforcement)"
	}
	return s
}
