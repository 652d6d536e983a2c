//go:build !linux

package doctor

import "runtime"

// kernelChecks on systems without cgroups, namespaces or Landlock.
func kernelChecks() []Check {
	os := runtime.GOOS
	return []Check{
		{Area: "cgroups", Status: Warn, Message: "no cgroups on " + os + ": executions are bounded by process group, timeouts and output caps only; pause uses SIGSTOP", Fix: "run termd on Linux for cgroup isolation"},
		{Area: "netns", Status: Warn, Message: "no network namespaces on " + os + ": commands marked offline still get the network", Fix: "run termd on Linux for network isolation"},
		{Area: "landlock", Status: Warn, Message: "no Landlock on " + os + ": commands are not filesystem-confined", Fix: "run termd on Linux"},
	}
}
