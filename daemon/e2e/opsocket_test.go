package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// termd listens on an operator socket beside the shared one that only
// root and termd's own user can open; an agent that connects and closes in
// a loop is held to connections.accept_rate (its excess connections are
// closed at accept, before any other work) while another agent and root
// are still served.
func TestOperatorSocketAndAcceptRate(t *testing.T) {
	requireRoot(t)
	const agent2 = 61003
	d := harness.Start(t, harness.Options{Config: "socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534, 61003]\nconnections:\n  per_uid: 16\n  accept_rate: 2\n"})
	op := filepath.Join(filepath.Dir(d.Socket), "termd-operator.sock")
	st, err := os.Lstat(op)
	if err != nil {
		t.Fatalf("no operator socket beside %s: %v", d.Socket, err)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Fatalf("operator socket %s: mode %v owner %d; want a socket, 0600, owned by termd's user", op, st.Mode(), st.Sys().(*syscall.Stat_t).Uid)
	}
	// An agent cannot open it (it still reaches termd on the shared socket).
	_, errOut, code := d.RunAs(harness.Nobody, "termctl", []string{"TERMD_SOCKET=" + op}, "status")
	if code == 0 || !strings.Contains(errOut, "permission denied") {
		t.Fatalf("an agent's termctl status on the operator socket: exit %d, %q; want permission denied", code, errOut)
	}
	if out, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "status"); code != 0 {
		t.Fatalf("the agent on the shared socket: exit %d\n%s%s", code, out, errOut)
	}

	fl := flood(t, d, harness.Nobody, 1, "loop")
	waitFor(t, func() bool { return strings.Contains(d.Log(), "connections.accept_rate") }, "the flooding agent's connections refused naming connections.accept_rate")
	for _, who := range []*syscall.Credential{nil, {Uid: agent2, Gid: 65534}} {
		if out, errOut, code := d.RunAs(who, "termctl", nil, "status"); code != 0 {
			t.Fatalf("termctl status as %v during the flood: exit %d\n%s%s", who, code, out, errOut)
		}
	}
	fl.stop()
}
