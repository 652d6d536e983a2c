// Package netmode names the networks an execution can get (docs/SANDBOX.md,
// "Network"). It is shared by the policy (which decides a plan's mode), the
// sandbox (which enforces it) and the clients (which validate what a person
// types), so it holds no daemon state.
package netmode

import (
	"fmt"
	"strings"
)

// Mode is a plan's network: one of the constants, or Egress+NAME.
type Mode string

const (
	// None: an empty network namespace of its own (loopback down) and,
	// where Landlock has TCP rules, no TCP bind or connect at all.
	None Mode = "none"
	// WorkspaceLoopback: a network namespace shared by the executions of one
	// principal in one workspace, with loopback up and no route out, so a
	// dev server one execution starts answers the next at 127.0.0.1.
	WorkspaceLoopback Mode = "workspace-loopback"
	// Host: the host's network (always asked for in confirm mode).
	Host Mode = "host"
	// Egress is the prefix of "egress:NAME": only the destinations the
	// configured allow-list NAME names, through termd's proxy.
	Egress = "egress:"
)

// Modes lists the plain modes, for help and completion.
var Modes = []Mode{None, WorkspaceLoopback, Host}

// Parse validates what a caller asked for: "" (the policy's choice), a plain
// mode, or "egress:NAME" with a NAME of letters, digits, '-', '_' and '.'.
// It returns the mode and, for egress, the allow-list's name.
func Parse(s string) (Mode, string, error) {
	switch Mode(s) {
	case "", None, WorkspaceLoopback, Host:
		return Mode(s), "", nil
	}
	if name, ok := strings.CutPrefix(s, Egress); ok {
		if err := validName(name); err != nil {
			return "", "", fmt.Errorf("network %q: %w", s, err)
		}
		return Mode(s), name, nil
	}
	return "", "", fmt.Errorf("network %q is not a network mode: ask for none, workspace-loopback, host or egress:NAME (an allow-list in termd's config), or leave it empty for the policy's choice", s)
}

func validName(name string) error {
	if name == "" {
		return fmt.Errorf("the allow-list name after %q is empty", Egress)
	}
	if len(name) > 64 {
		return fmt.Errorf("the allow-list name is longer than 64 characters")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("the allow-list name %q may hold only letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

// EgressName is the allow-list of an "egress:NAME" mode ("" for the others).
func (m Mode) EgressName() string {
	name, _ := strings.CutPrefix(string(m), Egress)
	if name == string(m) {
		return ""
	}
	return name
}

// IsEgress: the mode is "egress:NAME".
func (m Mode) IsEgress() bool { return strings.HasPrefix(string(m), Egress) }

// Contained: the execution reaches nothing outside the host's termd-made
// namespaces (none or the workspace loopback), so a program's need for the
// network costs no approval.
func (m Mode) Contained() bool { return m == None || m == WorkspaceLoopback }
