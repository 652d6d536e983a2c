package launcher

import (
	"strings"
	"testing"
)

// Encode's wire form, key by key in the order they are applied, with the
// seccomp program as the hex of its instructions' little-endian bytes; and
// it is made in one allocation.
func TestEncodeWireForm(t *testing.T) {
	c := Config{
		SayConfined: true, NetNSFD: 3, MountNS: true, Cwd: "/w", UserNSFD: 4,
		Mounts:  []Mount{{Kind: "readonly", Path: "/etc"}, {Kind: "hide", Path: "/root"}},
		SetCred: true, UID: 1000, GID: 100, Groups: []uint32{27},
		DropCaps: true, NoNewPrivs: true, RulesetFD: 5,
		Seccomp: []SockFilter{{Code: 0x20, K: 4}, {Code: 0x15, Jt: 1, Jf: 2, K: 0xc000003e}},
		Path:    "/usr/bin/pwd", Argv: []string{"pwd", "-P"}, Env: []string{"LANG=C.UTF-8"},
	}
	want := strings.Join([]string{
		"say_confined", "1", "netns_fd", "3", "mountns", "1", "cwd", "/w", "userns_fd", "4",
		"readonly", "/etc", "hide", "/root", "uid", "1000", "gid", "100", "group", "27",
		"drop_caps", "1", "no_new_privs", "1", "ruleset_fd", "5",
		"seccomp", "2000000004000000" + "150001023e0000c0",
		"path", "/usr/bin/pwd", "arg", "pwd", "arg", "-P", "env", "LANG=C.UTF-8",
	}, "\x00") + "\x00"
	if got := string(c.Encode()); got != want {
		t.Fatalf("Encode:\n%q\nwant\n%q", got, want)
	}
	// The bytes, and uid's and gid's digits (strconv has 0-99 made).
	if n := testing.AllocsPerRun(10, func() { c.Encode() }); n > 3 {
		t.Errorf("Encode made %v allocations, want 3", n)
	}
}
