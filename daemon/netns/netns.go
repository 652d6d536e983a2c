// Package netns keeps the workspace loopbacks (docs/SANDBOX.md, "Network"):
// one network namespace per principal and workspace, with its loopback up
// and no other device, so no route leads out. The executions of that
// principal in that workspace that run with network workspace-loopback are
// born in it (runner.Spec.NetNS), so a dev server one of them starts answers
// the next at 127.0.0.1:PORT, while another principal's executions, in their
// own namespace, cannot reach it.
//
// A namespace is made on first use, held by a descriptor while any
// execution (or port forward) uses it and for an idle period after the last
// one lets go, then closed: the kernel removes it with the last process in
// it. termd reaches into one by making a socket from a thread that entered
// it (Dial, Listen): a socket keeps the namespace it was made in.
package netns

import (
	"fmt"
	"sort"
	"time"
)

// Key names one workspace loopback: a principal (Broker's principal key,
// "uid:1000" or "token:NAME") and a workspace root (a real path).
type Key struct {
	Principal string
	Workspace string
}

func (k Key) String() string { return k.Principal + " in " + k.Workspace }

// Info describes one namespace, for status and doctor.
type Info struct {
	Key Key
	// Users counts the executions and forwards holding it now.
	Users   int
	Created time.Time
	// IdleSince is when the last user let go (zero while in use).
	IdleSince time.Time
}

// DefaultIdle is how long a namespace nobody uses is kept.
const DefaultIdle = 10 * time.Minute

// ErrUnavailable is returned where this host (or this daemon, not root)
// cannot make network namespaces.
type ErrUnavailable struct{ Why string }

func (e *ErrUnavailable) Error() string {
	return "workspace loopbacks are not available: " + e.Why
}

func sortInfos(out []Info) []Info {
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key.Principal != out[j].Key.Principal {
			return out[i].Key.Principal < out[j].Key.Principal
		}
		return out[i].Key.Workspace < out[j].Key.Workspace
	})
	return out
}

func noSpace(k Key) error {
	return fmt.Errorf("there is no workspace loopback for %s: nothing of theirs runs there with network workspace-loopback", k)
}
