// Package pool owns the runner's spawn pools: network namespaces (NetNS),
// per-execution cgroups (Cgroups) and pre-started termd-launch processes
// (Launchers), each made ahead in the background and handed to one
// execution, and the gate (Gate) that holds their refill back while an
// execution is starting or young.
//
// Making a network namespace and a cgroup directory is most of
// what a spawn costs beyond fork and exec, so both are made ahead, in the
// background, and handed out one per execution, made inline when a pool is
// empty. A cgroup is removed after its execution (as without a pool): its
// usage counters (cpu.stat, memory.stat) cannot be reset and the next
// execution could read them. A network namespace is reused when nothing of
// its execution can be left in it (NetNS.Recycle): see ReusableNetNS for
// which executions qualify and pristineNetNS for what is checked.
//
// Pre-started launchers: forking and exec'ing termd-launch is most of what a
// sandboxed spawn costs beyond the command's own exec, so the runner keeps a
// few launchers started ahead, each already in its own pooled cgroup and
// network namespace, in its own process group, with its stdout and stderr
// pipes, waiting on a unix socket (launcher.Pooled). An execution that takes
// one sends it the plan's configuration and descriptors (the Landlock
// ruleset) at once, so it confines itself while the intent is committed, and
// sends the byte that lets it exec the command only after BeforeRelease. A
// launcher is used once: it becomes the execution's main process. Plans a
// pooled launcher cannot serve (network allowed, a terminal, a user
// namespace, another launcher binary) start their launcher inline.
// The runner's side of the protocol both kinds of launcher take (sending the
// configuration, awaiting Confined, the release) is here too
// (protocol_linux.go).
//
// It imports daemon/runner/cgroup, daemon/runner/proctree and
// daemon/sandbox/launcher (the launcher's configuration type and
// protocol constants), never daemon/runner: what it needs of the runner
// (forking a launcher on a locked thread, removing a cgroup in the
// background) it is given as functions.
package pool
