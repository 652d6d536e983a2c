package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Issue 32 §1 and §2 against a real termd (root, sandbox required): the
// executions of one principal in one workspace share a loopback; another
// principal's do not; network none reaches nothing; a port forward reaches
// the loopback from the host for as long as its client holds it.

// netDaemon starts termd with the probe allowed and nobody (65534) as an
// agent that may connect.
func netDaemon(t *testing.T, extraConfig string) *harness.Daemon {
	t.Helper()
	dir := probeBin(t)
	pol := strings.Replace(testPolicy("  - {id: test.probe, program: probe, decision: allow, risk: low, reason: \"test: sandbox probe\"}"),
		"trusted_path: [", "trusted_path: ["+dir+", ", 1)
	return harness.Start(t, harness.Options{Policy: pol,
		Config: "sandbox: required\nsocket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534]\n" + extraConfig})
}

// startServer starts `probe serve PORT TEXT` in a session of its own (an
// execution that keeps running) and waits until it listens.
func startServer(t *testing.T, d *harness.Daemon, port int, text string) *termdv1.Execution {
	t.Helper()
	return startDevServer(t, d, []string{"probe", "serve", fmt.Sprint(port), text}, "listening on 127.0.0.1:")
}

// startDevServer starts argv as root in a session of its own, which must
// run without approval on the workspace loopback, and waits until its
// output says ready.
func startDevServer(t *testing.T, d *harness.Daemon, argv []string, ready string) *termdv1.Execution {
	t.Helper()
	ss, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{Label: "dev server"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: ss.Session.Id, Request: &termdv1.CommandRequest{
		Argv: argv, Cwd: d.Workspace, TimeoutSeconds: 300}})
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Plan
	if p.State != termdv1.PlanState_PLAN_STATE_PLANNED || p.Decision.GetSandbox().GetNetworkMode() != "workspace-loopback" {
		t.Fatalf("a dev server plan: %v, network %q, %v; want it to run without approval on the workspace loopback", p.State, p.Decision.GetSandbox().GetNetworkMode(), p.Decision.Reasons)
	}
	ex, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = d.Client.Executions.CancelExecution(context.Background(), &termdv1.CancelExecutionRequest{ExecutionId: ex.Execution.Id})
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := d.Client.Executions.ReadOutput(ctxT(t), &termdv1.ReadOutputRequest{ExecutionId: ex.Execution.Id})
		if err == nil && strings.Contains(string(out.Data), ready) {
			return ex.Execution
		}
		g, gerr := d.Client.Executions.GetExecution(ctxT(t), &termdv1.GetExecutionRequest{ExecutionId: ex.Execution.Id})
		if gerr == nil && g.Execution.FinishedAt != nil {
			t.Fatalf("the dev server ended: %v %s %s", g.Execution.State, g.Execution.Error, out.GetData())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dev server never said it listens: %v %q", err, out.GetData())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// probeNet runs the probe as root (the operator) with a network mode ("":
// the policy's choice) and returns its output and receipt.
func probeNet(t *testing.T, d *harness.Daemon, network string, args ...string) (string, map[string]any) {
	t.Helper()
	out, p, rec := probeRun(t, d, &termdv1.CommandRequest{Argv: append([]string{"probe"}, args...), Network: network})
	if want := network; want != "" && p.Decision.GetSandbox().GetNetworkMode() != want {
		t.Errorf("plan with network %s decided network %q", want, p.Decision.GetSandbox().GetNetworkMode())
	}
	return out, rec
}

func TestWorkspaceLoopbackSharedPerPrincipal(t *testing.T) {
	requireSandbox(t)
	d := netDaemon(t, "")
	// A server on the host's own loopback: no execution may reach it.
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go acceptAndClose(host)

	const port = 18431
	startServer(t, d, port, "hello from the dev server")

	// The same principal's next execution (root: uid 0 in a user namespace,
	// through a pre-started or an inline launcher) reaches it.
	for i := range 3 {
		out, rec := probeNet(t, d, "", "get", fmt.Sprintf("127.0.0.1:%d", port))
		wantPrefix(t, out, "got: hello from the dev server", fmt.Sprintf("the same principal's execution %d gets the dev server", i))
		sb, _ := rec["sandbox"].(map[string]any)
		if sb["network_mode"] != "workspace-loopback" || sb["network_namespace"] != true || sb["level"] != "full" {
			t.Errorf("receipt sandbox of a workspace-loopback execution: %v", sb)
		}
	}
	// ... but not the host's loopback: no route out.
	out, _ := probeNet(t, d, "workspace-loopback", "connect", host.Addr().String())
	wantPrefix(t, out, "error: connection refused", "a workspace-loopback execution connects to the host's loopback")

	// Network none reaches nothing: not the dev server, not the host.
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", port), host.Addr().String()} {
		out, rec := probeNet(t, d, "none", "connect", addr)
		wantPrefix(t, out, "denied", "a network-none execution connects to "+addr)
		if sb, _ := rec["sandbox"].(map[string]any); sb["network_mode"] != "none" {
			t.Errorf("receipt sandbox of a network-none execution: %v", sb)
		}
	}

	// Another principal (an agent) has a loopback of its own.
	stdout, stderr, code := d.RunAs(harness.Nobody, "termctl", nil, "run", "--cwd", d.Workspace, "--", "probe", "get", fmt.Sprintf("127.0.0.1:%d", port))
	if code != 0 || !strings.Contains(stdout, "connection refused") || strings.Contains(stdout, "hello from the dev server") {
		t.Errorf("another principal's execution reached the dev server (exit %d):\n%s%s", code, stdout, stderr)
	}
	// ... where its own server answers it, and not root.
	agentSrv := exec.Command(harness.Bin(t, "termctl"), "--socket", d.Socket, "run", "--cwd", d.Workspace, "--timeout", "300s", "--", "probe", "serve", fmt.Sprint(port+1), "agent's own")
	agentSrv.SysProcAttr = &syscall.SysProcAttr{Credential: harness.Nobody}
	srvOut, err := agentSrv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agentSrv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = agentSrv.Process.Signal(syscall.SIGINT); _ = agentSrv.Wait() }()
	if line, err := bufio.NewReader(srvOut).ReadString('\n'); err != nil || !strings.Contains(line, "listening") {
		t.Fatalf("the agent's dev server: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, srvOut) }()
	stdout, stderr, code = d.RunAs(harness.Nobody, "termctl", nil, "run", "--cwd", d.Workspace, "--", "probe", "get", fmt.Sprintf("127.0.0.1:%d", port+1))
	if code != 0 || !strings.Contains(stdout, "got: agent's own") {
		t.Errorf("the agent's next execution does not reach its own dev server (exit %d):\n%s%s", code, stdout, stderr)
	}
	out, _ = probeNet(t, d, "", "get", fmt.Sprintf("127.0.0.1:%d", port+1))
	wantPrefix(t, out, "error: connection refused", "root's execution reaches the agent's dev server")
}

// forwardJSON is what termctl port-forward -o json prints first.
type forwardJSON struct {
	ID           string `json:"id"`
	LocalAddress string `json:"local_address"`
	Principal    string `json:"principal"`
}

func httpGet(addr string) (string, error) {
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestPortForwardReachesTheWorkspaceLoopback(t *testing.T) {
	requireSandbox(t)
	d := netDaemon(t, "")
	const port = 18441
	srv := startServer(t, d, port, "forwarded dev server")

	// Nothing answers on the host before the forward.
	events, err := d.Client.Events.StreamEvents(ctxT(t), &termdv1.StreamEventsRequest{SessionId: srv.SessionId})
	if err != nil {
		t.Fatal(err)
	}
	pf := exec.Command(harness.Bin(t, "termctl"), "--socket", d.Socket, "-o", "json", "port-forward", srv.Id, fmt.Sprintf("0:%d", port))
	pfOut, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var pfErr strings.Builder
	pf.Stderr = &pfErr
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
	var f forwardJSON
	if err := json.NewDecoder(pfOut).Decode(&f); err != nil || !strings.HasPrefix(f.LocalAddress, "127.0.0.1:") {
		t.Fatalf("termctl port-forward: %+v %v %s", f, err, pfErr.String())
	}
	for i := range 2 {
		body, err := httpGet(f.LocalAddress)
		if err != nil || body != "forwarded dev server" {
			t.Fatalf("GET %d through the forward %s: %q %v", i, f.LocalAddress, body, err)
		}
	}
	// Who forwarded what is in the session's event stream.
	for {
		m, err := events.Recv()
		if err != nil {
			t.Fatalf("event stream: %v", err)
		}
		if ev := m.GetEvent(); ev.GetKind() == termdv1.EventKind_EVENT_KIND_PORT_FORWARD {
			pe := ev.GetPortForward()
			if pe.Kind != "opened" || pe.ForwardId != f.ID || pe.LocalAddress != f.LocalAddress || pe.RemotePort != port || pe.By != "root" {
				t.Errorf("the forward's event: %+v", pe)
			}
			break
		}
	}
	// An operator sees it.
	list, _, code := d.Run("termctl", "port-forward", "--list")
	if code != 0 || !strings.Contains(list, f.ID) || !strings.Contains(list, f.LocalAddress) {
		t.Errorf("termctl port-forward --list (exit %d):\n%s", code, list)
	}
	// An agent cannot forward into root's loopback.
	_, stderr, code := d.RunAs(harness.Nobody, "termctl", nil, "port-forward", srv.Id, "0:"+fmt.Sprint(port))
	if code == 0 || !strings.Contains(stderr, "not found") && !strings.Contains(stderr, "only into your own") {
		t.Errorf("an agent forwarded into root's loopback (exit %d): %s", code, stderr)
	}

	// Closing the client closes the port.
	if err := pf.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := pf.Wait(); err != nil {
		t.Errorf("termctl port-forward after Ctrl-C: %v %s", err, pfErr.String())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", f.LocalAddress, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections after its client went away", f.LocalAddress)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// An operator closes a forward someone holds: its client is told.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := d.Client.Forwards.PortForward(ctx, &termdv1.PortForwardRequest{SessionId: srv.SessionId, RemotePort: port})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if body, err := httpGet(first.Forward.LocalAddress); err != nil || body != "forwarded dev server" {
		t.Fatalf("GET through a forward of the session: %q %v", body, err)
	}
	out, errOut, code := d.Run("termctl", "port-forward", "--close", first.Forward.Id)
	if code != 0 {
		t.Fatalf("termctl port-forward --close (exit %d): %s%s", code, out, errOut)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("the forward's stream ended without saying it was closed: %v", err)
		}
		if why := m.Forward.GetClosed(); why != "" {
			if !strings.Contains(why, "closed by root") {
				t.Errorf("closed: %q", why)
			}
			break
		}
	}
	if c, err := net.DialTimeout("tcp", first.Forward.LocalAddress, time.Second); err == nil {
		c.Close()
		t.Errorf("%s accepts connections after an operator closed it", first.Forward.LocalAddress)
	}
}
