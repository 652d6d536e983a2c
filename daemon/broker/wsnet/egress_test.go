package wsnet

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newTestNet(netNS bool) *Net {
	cfg := config.Default()
	return New(Deps{
		Config: func() *config.Config { return cfg },
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Bus:    events.New(events.Options{}),
		NetNS:  func() bool { return netNS },
	})
}

// An egress:NAME plan is refused before anything is prepared, with what to
// do, when its list is not configured or the daemon cannot make the
// namespace its proxy listens in; the policy is told the lists only when the
// proxy can run.
func TestEgressNeedsAConfiguredListAndNamespaces(t *testing.T) {
	without := newTestNet(false)
	if l := without.EgressLists(); l != nil {
		t.Errorf("lists offered to the policy without network namespaces: %v, want none", l)
	}
	for mode, words := range map[string][]string{
		"egress:nope":       {"names no egress allow-list", "replan"},
		"egress:registries": {"needs network namespaces", "replan with network none"},
	} {
		err := without.Available(mode)
		if errdefs.KindOf(err) != errdefs.KindPrecondition {
			t.Errorf("%s: %v, want a failed precondition", mode, err)
			continue
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", mode, err, w)
			}
		}
	}
	for _, mode := range []string{"", "none", "host", "workspace-loopback"} {
		if err := without.Available(mode); err != nil {
			t.Errorf("network %q refused: %v", mode, err)
		}
	}
	if os.Geteuid() == 0 {
		with := newTestNet(true)
		if l := with.EgressLists(); len(l) != 1 || l[0] != "registries" {
			t.Errorf("lists offered to the policy: %v, want the built-in registries", l)
		}
		if err := with.Available("egress:registries"); err != nil {
			t.Errorf("egress:registries refused where the proxy can run: %v", err)
		}
	}
}

// A forward names an execution or a session, not both and not neither.
func TestPortForwardNamesOneTarget(t *testing.T) {
	n := newTestNet(false)
	send := func(*termdv1.PortForwardResponse) error { t.Fatal("a refused forward sent an answer"); return nil }
	caller := &termdv1.Principal{Uid: 65534, Gid: 65534, Name: "nobody", Role: termdv1.Role_ROLE_AGENT}
	for _, c := range []struct {
		r    *termdv1.PortForwardRequest
		word string
	}{
		{&termdv1.PortForwardRequest{ExecutionId: "e", SessionId: "s", RemotePort: 80}, "not both"},
		{&termdv1.PortForwardRequest{RemotePort: 80}, "name the execution (or session)"},
	} {
		err := n.PortForward(t.Context(), caller, c.r, send)
		if errdefs.KindOf(err) != errdefs.KindInvalid || !strings.Contains(err.Error(), c.word) {
			t.Errorf("%v: %v, want an invalid argument saying %q", c.r, err, c.word)
		}
	}
}

// The lists' names the policy is told are those of the config in use,
// sorted: a reload's new config (another list, a list gone) is followed at
// the next ask.
func TestEgressListNamesFollowTheConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the lists are offered only to a root daemon")
	}
	n := newTestNet(true)
	first := config.Default()
	second := config.Default()
	second.Egress.AllowLists = map[string][]string{"docs": {"example.org"}, "apt": {"deb.debian.org"}}
	cfg := first
	n.Config = func() *config.Config { return cfg }
	for i, want := range []string{"registries", "registries", "apt docs registries", "apt docs registries", "registries"} {
		if i == 2 {
			cfg = second
		}
		if i == 4 {
			cfg = first
		}
		if got := strings.Join(n.EgressLists(), " "); got != want {
			t.Fatalf("ask %d: lists %q, want %q", i, got, want)
		}
	}
}
