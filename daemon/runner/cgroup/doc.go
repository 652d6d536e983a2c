// Package cgroup owns the cgroup side of the runner: what the host's
// hierarchies offer (Probe, the layout found and what cannot be used, in
// words), the runner's parent tree (Tree: its v2 parent and v1 parents made
// and delegated at start, termd moved into a leaf where that gives limits,
// removed at Close), and one execution's cgroups (Cgroup: made fresh or
// ahead for a pool, pids and memory limits in v2 or v1, the spawning
// thread's entering and leaving of v1, kill, freeze, membership, the files
// read at the end kept open, removal), plus killing what a previous daemon
// left in a cgroup (KillPath).
//
// It imports only the standard library and golang.org/x/sys/unix: no other
// termd package. Files are Linux-only; on other systems the package is
// empty.
package cgroup
