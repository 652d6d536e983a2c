// Package buildinfo holds the version stamped into every binary at build time.
package buildinfo

import "runtime/debug"

// Version is set with -ldflags "-X github.com/termd/termd/internal/buildinfo.Version=...".
var Version = ""

// APIVersion is the protobuf API package the binaries speak.
const APIVersion = "termd.v1"

// String returns the version, falling back to the module's VCS information.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
