// Package ttyready tells whether a program on a pseudo-terminal is waiting
// for input, so "send and wait" can return when the program is ready again
// instead of after a fixed sleep or a timeout.
//
// ForegroundReading looks at the terminal's foreground process group (Linux
// only: /proc) and reports whether one of its tasks is blocked reading the
// terminal: in read(2) on it, or in select/poll/epoll with the terminal among
// the descriptors it waits to read. Wait combines that probe with output
// quiet, a pattern, the program's exit and a timeout, and says which of them
// ended the wait.
//
// What the probe cannot know (false positives and negatives):
//   - A program that polls the terminal with a timeout while it works (top,
//     watch-like screens, editors with timers, a Node.js process waiting on a
//     timer with stdin registered) counts as reading between its updates;
//     the caller's quiet time and settle time cover the screens that keep
//     changing, not the ones that are idle but busy elsewhere.
//   - Input just written to the master is handed to the program by a kernel
//     work item: for a moment the program may still show as blocked reading.
//     Wait therefore wants the reading state to hold, with no new output, for
//     a settle time before it says "waiting_for_input": 30 ms once the
//     program reacted with output, 150 ms while it has not (a work item
//     delayed longer than that on an overloaded machine still fools it).
//   - A task blocked in epoll on a descriptor set that holds the terminal but
//     waiting for something else (a socket) is reported as reading.
//   - A program reading the terminal in a process group that is not the
//     foreground group (a background job) is not reported: it would be
//     stopped with SIGTTIN anyway.
//   - The probe reads /proc/<pid>/task/<tid>/syscall and /proc/<pid>/mem,
//     which need ptrace access to the program: termd runs as root, or as the
//     program's user with kernel.yama.ptrace_scope 0 or 1 (1 only for its
//     descendants). Without access it returns an error, not a guess.
//   - Another devpts instance (a container's) numbers its terminals the same
//     way; only members of this terminal's foreground group are looked at,
//     so that matters only for a group spanning two devpts mounts.
package ttyready
