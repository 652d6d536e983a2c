//go:build !linux && !darwin

package runner

// procStart: this platform's process start time is not read, so a pid
// cannot be told apart from a later process that reuses it (0: recovery
// after a crash does not kill by pid here).
func procStart(int) uint64 { return 0 }
