// Package loopback is the one check for "this stays on this machine": the
// gateway's and the MCP bridge's listen addresses, the metrics and profiling
// listeners, and a plain-http adviser URL that may carry the API key.
package loopback

import (
	"net"
	"strings"
)

// Host reports whether host (a name or an IP literal, without a port) is
// loopback: "localhost" or a loopback IP (127.0.0.0/8, ::1).
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Listen reports whether a HOST:PORT listen address binds loopback only. An
// empty host (every interface) is not loopback; a malformed address is an
// error.
func Listen(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	return host != "" && Host(host), nil
}
