//go:build unix && !linux

package safefs

// openBeneath opens rel below dirfd one component at a time, following no
// link (there is no openat2 here).
func openBeneath(dirfd int, rel string) (int, error) { return openWalk(dirfd, rel) }
