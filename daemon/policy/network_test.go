package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/verdict"
)

// The network mode (issue 32): the policy's default is the workspace
// loopback for offline work and host for a network program (asked); a
// contained mode makes a network program offline; host makes anything
// network use; the mode is part of the canonical request; a bad mode or an
// unknown allow-list is refused.
func TestNetworkMode(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "Makefile"), []byte("all:\n\ttrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := Default()
	ctx := decision.Context{Workspaces: []string{ws}, Sandbox: true}
	decide := func(network string, argv ...string) decision.Decision {
		t.Helper()
		return p.Decide(decision.Request{Argv: argv, Cwd: ws, Mode: verdict.ModeConfirm, Network: network}, ctx)
	}
	for _, c := range []struct {
		network string
		argv    []string
		mode    string
		verdict verdict.Verdict
		uses    bool
	}{
		{"", []string{"ls"}, "workspace-loopback", verdict.Allow, false},
		{"", []string{"make"}, "workspace-loopback", verdict.Allow, false}, // confined project code, no approval
		{"none", []string{"make"}, "none", verdict.Allow, false},
		{"host", []string{"make"}, "host", verdict.Ask, true},
		{"host", []string{"ls"}, "host", verdict.Ask, true},
		{"", []string{"curl", "https://example.com"}, "host", verdict.Ask, true},
		{"workspace-loopback", []string{"curl", "http://127.0.0.1:8000/"}, "workspace-loopback", verdict.Allow, false},
		{"workspace-loopback", []string{"curl", "https://example.com"}, "workspace-loopback", verdict.Allow, false}, // held there: reaches nothing outside
		{"egress:npm", []string{"ls"}, "egress:npm", verdict.Ask, true},
	} {
		d := decide(c.network, c.argv...)
		if d.Sandbox.NetworkMode != c.mode || d.Verdict != c.verdict || d.Network != c.uses || d.Sandbox.Network != (c.mode == "host") {
			t.Errorf("%v with network %q: mode %q verdict %s network %v (sandbox host %v), want %q %s %v; %v",
				c.argv, c.network, d.Sandbox.NetworkMode, d.Verdict, d.Network, d.Sandbox.Network, c.mode, c.verdict, c.uses, d.Reasons)
		}
		if why := strings.Join(d.Reasons, "\n"); !c.uses && strings.Contains(why, "uses the network") {
			t.Errorf("%v with network %q asks for the network: %s", c.argv, c.network, why)
		}
	}
	// Part of the canonical request.
	a, b := p.Explain(decision.Request{Argv: []string{"ls"}, Cwd: ws, Network: "none"}, ctx), p.Explain(decision.Request{Argv: []string{"ls"}, Cwd: ws}, ctx)
	if a.RequestHash == b.RequestHash || !strings.Contains(string(a.Request), `"network_mode":"none"`) || !strings.Contains(string(b.Request), `"network_mode":"workspace-loopback"`) {
		t.Errorf("the network mode is not in the canonical request:\n%s\n%s", a.Request, b.Request)
	}
	// Refusals name what was wrong.
	if d := decide("internet", "ls"); d.Verdict != verdict.Deny || !strings.Contains(strings.Join(d.Reasons, "\n"), `network "internet" is not a network mode`) {
		t.Errorf("network internet: %s %v", d.Verdict, d.Reasons)
	}
	if d := decide("egress:", "ls"); d.Verdict != verdict.Deny {
		t.Errorf("network egress: with no name: %s %v", d.Verdict, d.Reasons)
	}
	ctx.EgressLists = []string{"pypi"}
	if d := decide("egress:npm", "ls"); d.Verdict != verdict.Deny || !strings.Contains(strings.Join(d.Reasons, "\n"), "configured: pypi") {
		t.Errorf("an unknown allow-list: %s %v", d.Verdict, d.Reasons)
	}
	if d := decide("egress:pypi", "ls"); d.Verdict == verdict.Deny {
		t.Errorf("a configured allow-list: %s %v", d.Verdict, d.Reasons)
	}
}

// A network client whose every destination is loopback (issue 32: an agent
// iterating on a dev server) gets the workspace loopback and costs no
// approval in confirm mode when the sandbox is fully enforced; a URL that is
// not loopback, an option that sends the request elsewhere, an explicit
// host network or an unenforced sandbox keep host (asked); its files are
// still decided as writes.
func TestLoopbackClients(t *testing.T) {
	f := newFixture(t)
	enforced := f.ctx
	enforced.Sandbox, enforced.SandboxBy = true, "Landlock"
	decide := func(ctx decision.Context, mode verdict.Mode, network string, argv ...string) decision.Decision {
		t.Helper()
		return f.pol.Decide(decision.Request{Argv: argv, Cwd: f.ws, Mode: mode, Network: network}, ctx)
	}
	// Loopback only: runs without approval, offline, read-only.
	for _, argv := range [][]string{
		{"curl", "http://127.0.0.1:8080/"},
		{"curl", "-s", "http://localhost:3000/api?x=1"},
		{"curl", "-sS", "-f", "127.0.0.1:8080"},
		{"curl", "localhost"},
		{"curl", "HTTP://LocalHost:80/"},
		{"curl", "https://127.0.0.2:8443/"},
		{"curl", "http://[::1]:8080/"},
		{"curl", "-g", "http://[::1]/"},
		{"curl", "http://user:pw@127.0.0.1:8080/"},
		{"curl", "http://127.0.0.1:/"},
		{"curl", "-sL", "http://127.0.0.1:8080/a", "http://localhost:8081/b"},
		{"curl", "--url", "http://127.0.0.1:1/"},
		{"curl", "-X", "POST", "-H", "Content-Type: application/json", "-d", `{"a":1}`, "http://127.0.0.1:8080/api"},
		{"curl", "-s", "http://127.0.0.1:8080/page{1,2}"},
		{"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:8080/"},
		{"wget", "-qO-", "http://127.0.0.1:8080/"},
		{"wget", "-O", "-", "localhost:8080"},
		{"wget", "--spider", "http://127.0.0.1/"},
		{"timeout", "10", "curl", "-s", "http://127.0.0.1:8080/"},
	} {
		d := decide(enforced, verdict.ModeConfirm, "", argv...)
		if d.Verdict != verdict.Allow || d.Network || d.Sandbox.NetworkMode != "workspace-loopback" || d.Sandbox.Network || !d.ReadOnly || d.Sandbox.Profile != decision.SandboxReadOnly {
			t.Errorf("%q: %s network %v mode %q (host %v) read-only %v profile %s, want allow on the workspace loopback, read-only; %q",
				argv, d.Verdict, d.Network, d.Sandbox.NetworkMode, d.Sandbox.Network, d.ReadOnly, d.Sandbox.Profile, d.Reasons)
		}
		if !hasStep(d, "network", "reaches only loopback addresses") {
			t.Errorf("%q: no network step says why it gets the workspace loopback: %+v", argv, d.Steps)
		}
	}
	checkNotLoopbackClients(t, decide, enforced)
	// Asked for host, or an unenforced sandbox: host, asked.
	for _, c := range []struct {
		ctx     decision.Context
		network string
		why     string
	}{{enforced, "host", "uses the network"}, {f.ctx, "", "uses the network"}} {
		d := decide(c.ctx, verdict.ModeConfirm, c.network, "curl", "http://127.0.0.1:8080/")
		if d.Verdict != verdict.Ask || !d.Network || d.Sandbox.NetworkMode != "host" || !hasReason(d, c.why) {
			t.Errorf("curl to the loopback with network %q, sandbox enforced %v: %s network %v mode %q; %q", c.network, c.ctx.Sandbox, d.Verdict, d.Network, d.Sandbox.NetworkMode, d.Reasons)
		}
	}
	if d := decide(f.ctx, verdict.ModeConfirm, "", "curl", "http://127.0.0.1:8080/"); !hasStep(d, "network", "without a fully enforced sandbox") {
		t.Errorf("an unenforced sandbox does not say why a loopback curl keeps host: %+v", d.Steps)
	}
	// Writes are decided as writes: offline, but asked (curl and wget are
	// not plain edits), and a protected name is refused as before.
	for _, argv := range [][]string{
		{"curl", "-o", "page.html", "http://127.0.0.1:8080/"},
		{"curl", "-sO", "http://127.0.0.1:8080/app.js"},
		{"curl", "--output-dir", "build", "-o", "x.html", "http://localhost:8080/"},
		{"wget", "http://127.0.0.1:8080/"},
	} {
		d := decide(enforced, verdict.ModeConfirm, "", argv...)
		if d.Verdict != verdict.Ask || d.Network || d.Sandbox.NetworkMode != "workspace-loopback" || len(d.Writes) == 0 || !hasReason(d, "writes") || hasReason(d, "uses the network") {
			t.Errorf("%q: %s network %v mode %q writes %v; want asked for its writes only; %q", argv, d.Verdict, d.Network, d.Sandbox.NetworkMode, d.Writes, d.Reasons)
		}
	}
	// Standard output and /dev/null are no files: nothing written.
	for _, argv := range [][]string{{"curl", "-o", "-", "http://127.0.0.1:8080/"}, {"curl", "-so", "/dev/null", "http://127.0.0.1:8080/"}, {"wget", "-O", "/dev/null", "http://127.0.0.1:8080/"}} {
		if d := decide(enforced, verdict.ModeConfirm, "", argv...); d.Verdict != verdict.Allow || len(d.Writes) > 0 || !d.ReadOnly {
			t.Errorf("%q: %s writes %v; want allowed, read-only; %q", argv, d.Verdict, d.Writes, d.Reasons)
		}
	}
	if d := decide(enforced, verdict.ModeConfirm, "", "wget", "-O", "-", "-O", "out.html", "http://127.0.0.1:8080/"); d.Verdict != verdict.Ask || !grammar.Contains(d.Writes, f.ws+"/out.html") {
		t.Errorf("wget -O - -O out.html: %s writes %v; %q", d.Verdict, d.Writes, d.Reasons)
	}
	if d := decide(enforced, verdict.ModeConfirm, "", "curl", "-o", ".bashrc", "http://127.0.0.1:8080/"); d.Verdict != verdict.Deny {
		t.Errorf("curl -o .bashrc from the loopback: %s %q", d.Verdict, d.Reasons)
	}
	if d := decide(enforced, verdict.ModeConfirm, "", "curl", "-K", "cfg", "http://127.0.0.1:8080/"); d.Verdict != verdict.Deny || !hasReason(d, "reads options from a file") {
		t.Errorf("curl -K to the loopback: %s %q", d.Verdict, d.Reasons)
	}
	// curl never reads ~/.curlrc: -q comes first.
	if d := decide(enforced, verdict.ModeConfirm, "", "curl", "http://127.0.0.1:8080/"); len(d.ExecArgv) < 2 || d.ExecArgv[1] != "-q" {
		t.Errorf("curl's exec argv %q does not start with -q", d.ExecArgv)
	}
}

// checkNotLoopbackClients checks that what reaches beyond the loopback (or
// may: a proxy, a resolve override, URLs from input) is not run on the
// workspace loopback, and that options the grammar does not know make curl
// unknown code, never a loopback client.
func checkNotLoopbackClients(t *testing.T, decide func(ctx decision.Context, mode verdict.Mode, network string, argv ...string) decision.Decision, enforced decision.Context) {
	// Anything else that reaches out: host, asked for the network.
	for _, argv := range [][]string{
		{"curl", "https://example.com"},
		{"curl", "http://127.0.0.1:8080/", "https://example.com/"},
		{"curl", "--url", "http://example.test/", "http://127.0.0.1:8080/"},
		{"wget", "-qO-", "http://127.0.0.1:8080/", "http://example.test/"},
		{"curl", "http://127.0.0.1.example.com/"},
		{"curl", "http://localhost.example.com/"},
		{"curl", "http://127.0.0.1@example.com/"},
		{"curl", "http://127.0.0.1:8080@example.com/"},
		{"curl", "http://a@127.0.0.1@example.com/"},
		{"curl", "http://127.1/"},
		{"curl", "http://2130706433/"},
		{"curl", "http://0x7f.0.0.1/"},
		{"curl", "http://0177.0.0.1/"},
		{"curl", "http://%31%32%37.0.0.1/"},
		{"curl", "http://localhost./"},
		{"curl", "http://0.0.0.0:8080/"},
		{"curl", "http://169.254.169.254/"},
		{"curl", "http://[::2]/"},
		{"curl", "http://[::1%25lo]/"},
		{"curl", "http://::1/"},
		{"curl", "http://127.0.0.1:80x/"},
		{"curl", "http://{127.0.0.1,example.com}/"},
		{"curl", "http://127.0.0.1{,.example.com}/"},
		{"curl", "-x", "http://127.0.0.1:3128", "http://127.0.0.1:8080/"},
		{"curl", "--proxy", "http://proxy.example:3128", "http://localhost/"},
		{"curl", "--resolve", "localhost:80:203.0.113.7", "http://localhost/"},
		{"curl", "--connect-to", "::example.com:", "http://127.0.0.1/"},
		{"curl", "--alt-svc", "alt.txt", "https://localhost/"},
		{"xargs", "curl", "-s"}, // its URLs come from its input
	} {
		d := decide(enforced, verdict.ModeConfirm, "", argv...)
		if d.Verdict == verdict.Allow || d.Sandbox.NetworkMode == "workspace-loopback" {
			t.Errorf("%q: %s on network %q, want it asked (or denied) off the workspace loopback; %q", argv, d.Verdict, d.Sandbox.NetworkMode, d.Reasons)
		}
	}
	// Options the grammar does not know make curl unknown code (its
	// arguments unread), never a loopback client.
	for _, argv := range [][]string{
		{"curl", "--unix-socket", "/run/docker.sock", "http://localhost/v1.43/containers/json"},
		{"curl", "--preproxy", "socks5://example.com", "http://localhost/"},
	} {
		d := decide(enforced, verdict.ModeConfirm, "", argv...)
		if hasStep(d, "network", "reaches only loopback") || !hasReason(d, "runs as unknown code") {
			t.Errorf("%q: decided as a loopback client, or not as unknown code: %q %+v", argv, d.Reasons, d.Steps)
		}
	}
}

func hasStep(d decision.Decision, name, sub string) bool {
	for _, st := range d.Steps {
		if (st.Name == name || st.Name == "inner "+name) && strings.Contains(st.Detail, sub) {
			return true
		}
	}
	return false
}
