package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	"github.com/termd/termd/internal/testpki"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// fleetTLSPort is the port of every host's listen_tls (each network
// namespace has its own ports).
const fleetTLSPort = "7443"

// fleetHost is one termd "host" of the fleet test: a network namespace
// with its link, a termd in it, and that termd's agent (uid 65534 on its
// unix socket).
type fleetHost struct {
	name string
	net  *harness.NetHost
	d    *harness.Daemon
	addr string // IP:7443 on the link
}

func mustFiles(t *testing.T, c *testpki.Cert, err error, dir, name string, trust *testpki.CA) testpki.Files {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.WriteAll(dir, name, trust)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sseEvent is one event of the gateway's merged stream.
type sseEvent struct {
	Kind, ID string
	Data     map[string]any
}

// fleetStream reads GET /v1/fleet/events in the background.
type fleetStream struct {
	mu     sync.Mutex
	events []sseEvent
	err    error
	cancel context.CancelFunc
}

func openFleetStream(t *testing.T, url, token string) *fleetStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/v1/fleet/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET /v1/fleet/events: %d %s", res.StatusCode, b)
	}
	s := &fleetStream{cancel: cancel}
	t.Cleanup(func() { cancel(); res.Body.Close() })
	go func() {
		br := bufio.NewReader(res.Body)
		var ev sseEvent
		var data strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if data.Len() > 0 {
					_ = json.Unmarshal([]byte(data.String()), &ev.Data)
					s.mu.Lock()
					s.events = append(s.events, ev)
					s.mu.Unlock()
				}
				ev, data = sseEvent{}, strings.Builder{}
			case strings.HasPrefix(line, "event: "):
				ev.Kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				data.WriteString(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	return s
}

func (s *fleetStream) snapshot() ([]sseEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sseEvent(nil), s.events...), s.err
}

// outputText is an output event's data (base64 in the API's JSON).
func outputText(e sseEvent) string {
	o, _ := e.Data["output"].(map[string]any)
	d, _ := o["data"].(string)
	b, _ := base64.StdEncoding.DecodeString(d)
	return string(b)
}

// gseq is an event's global_seq (a string in the API's JSON).
func gseq(m map[string]any) uint64 {
	switch v := m["global_seq"].(type) {
	case string:
		n, _ := strconv.ParseUint(v, 10, 64)
		return n
	case float64:
		return uint64(v)
	}
	return 0
}

// gw is the fleet gateway's REST API as the person alice.
type fleetGW struct {
	t     *testing.T
	url   string
	token string
}

func (g *fleetGW) do(method, path string, body any) (int, map[string]any) {
	g.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, g.url+path, r)
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{"raw": string(b)}
	}
	return res.StatusCode, m
}

func (g *fleetGW) call(method, path string, body any) map[string]any {
	g.t.Helper()
	code, m := g.do(method, path, body)
	if code != 200 {
		g.t.Fatalf("%s %s: %d %v", method, path, code, m)
	}
	return m
}

// hostStates is GET /v1/hosts: name -> state.
func (g *fleetGW) hostStates() map[string]string {
	g.t.Helper()
	out := map[string]string{}
	for _, h := range g.call("GET", "/v1/hosts", nil)["hosts"].([]any) {
		hm := h.(map[string]any)
		out[fmt.Sprint(hm["name"])] = fmt.Sprint(hm["state"])
	}
	return out
}

// runOn plans, approves and executes a write on host through the gateway
// (as alice) and waits for its receipt.
func (g *fleetGW) runOn(host, file string) string {
	g.t.Helper()
	p := g.call("POST", "/v1/hosts/"+host+"/plans", map[string]any{"request": map[string]any{"argv": []string{"touch", file}, "mode": "MODE_CONFIRM"}})["plan"].(map[string]any)
	id, hash := fmt.Sprint(p["id"]), fmt.Sprint(p["decision"].(map[string]any)["request_hash"])
	g.call("POST", "/v1/hosts/"+host+"/plans/"+id+":approve", map[string]any{"request_hash": hash})
	x := g.call("POST", "/v1/hosts/"+host+"/plans/"+id+":execute", map[string]any{})["execution"].(map[string]any)
	return g.waitReceipt(host, fmt.Sprint(x["id"]))
}

func (g *fleetGW) waitReceipt(host, execID string) string {
	g.t.Helper()
	var rid string
	waitUntil(g.t, host+": execution "+execID+" has its receipt", func() (bool, string) {
		x := g.call("GET", "/v1/hosts/"+host+"/executions/"+execID, nil)["execution"].(map[string]any)
		rid, _ = x["receipt_id"].(string)
		return rid != "" && x["state"] == "EXECUTION_STATE_SUCCEEDED", fmt.Sprint(x)
	})
	return rid
}

// termctlTLS runs termctl against addr's mutual-TLS listener.
func termctlTLS(t *testing.T, addr string, f testpki.Files, args ...string) (string, int) {
	t.Helper()
	all := []string{"--daemon", "tls://" + addr}
	if f.Cert != "" {
		all = append(all, "--tls-cert", f.Cert, "--tls-key", f.Key)
	}
	all = append(all, "--tls-ca", f.CA)
	cmd := exec.Command(harness.Bin(t, "termctl"), append(all, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/tmp", "NO_COLOR=1", "TERMD_SOCKET=/nonexistent/termd.sock"}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestFleetEndToEnd: three termd hosts in network namespaces on veth links,
// each with its own address, state and mutual-TLS listener, exporting its
// receipts to a real OpenTelemetry Collector in the root namespace; one
// termd-gateway in the root namespace over mTLS to all three. Agents on
// every host plan writes that need approval; the plans appear in one
// fleet queue with their hosts; a person (alice, a gateway token) approves
// one in the console in real headless Chromium and the others over REST;
// each runs on its own host and its receipt names alice and the gateway's
// certificate. A long command runs on host C when C's link is cut: A and B
// are served meanwhile (plan, approve, run through the gateway), C is
// shown down on /v1/hosts; C's command ends while cut; the link stays cut
// until the gateway's merged stream reports C down (its stream from C
// broke), so that when the link is back the stream resumes C from its last
// seq: every event of C's it missed arrives (compared by seq with C's own
// event log on its unix socket), with the receipt. Finally the
// collector's file holds every receipt of every host, each verifying
// offline with its host's public key. Certificates: none, or one from
// another CA, is refused in the handshake (before any call); an agent's
// certificate cannot approve; a certificate mapped on host A has no
// standing on host B.
func TestFleetEndToEnd(t *testing.T) {
	requireRoot(t)
	br := harness.ConsoleBrowser(t)
	nets := harness.NewNetHosts(t, 3)
	col := harness.StartCollectorOn(t, "0.0.0.0")

	// Certificates: one fleet CA; each host's server certificate names its
	// link address; the gateway's client certificate (gateway-1) is an
	// operator on every host, an agent's (agent-a) is mapped on host A
	// only; a stranger's comes from another CA.
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	ca, other := testpki.MustCA("termd fleet CA"), testpki.MustCA("not the fleet CA")
	gwCert, err := ca.Client("gateway-1")
	gwFiles := mustFiles(t, gwCert, err, dir, "gateway-1", ca)
	agentCert, err := ca.Client("agent-a")
	agentFiles := mustFiles(t, agentCert, err, dir, "agent-a", ca)
	strangerCert, err := other.Client("gateway-1") // the gateway's name, the wrong CA
	strangerFiles := mustFiles(t, strangerCert, err, dir, "stranger", ca)
	noCert := testpki.Files{CA: gwFiles.CA}

	names := []string{"host-a", "host-b", "host-c"}
	hosts := startFleetHosts(t, names, nets, ca, dir, col)
	a, b, c := hosts[0], hosts[1], hosts[2]

	// --- Certificates over the real links ---
	t.Run("certificates", func(t *testing.T) {
		checkFleetCertificates(t, ca, a, b, strangerCert, noCert, strangerFiles, agentFiles)
	})

	// --- The gateway: one fleet over mTLS, alice its person ---
	g := startFleetGateway(t, dir, hosts, gwFiles)
	stream := openFleetStream(t, g.url, g.token)

	// --- Agents plan on all three; one queue; approvals carried home ---
	plans := approveAgentPlansAcrossFleet(t, br, g, names, hosts)

	// --- A long command on C; C's link is cut while it runs ---
	fin := runLongCommandAcrossCut(t, g, stream, a, b, c, plans[2].ag)

	checkCutHostEventsArrive(t, g, stream, c, fin)

	checkCollectorHoldsEveryReceipt(t, col, hosts)
}

// startFleetHosts starts a daemon in each network namespace of nets, named
// by names, listening for mTLS on its link address with a server certificate
// from ca, gateway-1 its operator (and agent-a an agent on the first host
// only), exporting its receipts to the collector col.
func startFleetHosts(t *testing.T, names []string, nets []*harness.NetHost, ca *testpki.CA, dir string, col *harness.Collector) (hosts []*fleetHost) {
	hosts = make([]*fleetHost, 3)
	for i, n := range names {
		nh := nets[i]
		srv, err := ca.Server(n, []net.IP{net.ParseIP(nh.IP)})
		sf := mustFiles(t, srv, err, dir, n, ca)
		clients := "    - {name: gateway-1, cn: gateway-1, role: operator, gateway: true}\n"
		if i == 0 {
			clients += "    - {name: agent-a, cn: agent-a, role: agent, run_as: nobody}\n"
		}
		cfg := agentConfig + fmt.Sprintf(`listen_tls:
  address: %s
  cert_file: %s
  key_file: %s
  client_ca_file: %s
  clients:
%sexport:
  otlp:
    endpoint: %s
    protocol: grpc
    host_name: %s
    max_backoff: 1s
`, net.JoinHostPort(nh.IP, fleetTLSPort), sf.Cert, sf.Key, sf.CA, clients, col.GRPCEndpoint(nh.RootIP), n)
		d := harness.Start(t, harness.Options{NetNS: nh.Name, AskWrites: true, Config: cfg})
		// The agent (uid 65534) writes in its workspace.
		if err := os.Chown(d.Workspace, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		hosts[i] = &fleetHost{name: n, net: nh, d: d, addr: net.JoinHostPort(nh.IP, fleetTLSPort)}
	}
	return hosts
}

// checkFleetCertificates: over the real links, a client without a
// certificate or with another CA's is refused in the handshake, agent-a is
// an agent on host A and nothing on B, and cannot approve, not even its own
// plan.
func checkFleetCertificates(t *testing.T, ca *testpki.CA, a, b *fleetHost, strangerCert *testpki.Cert, noCert, strangerFiles, agentFiles testpki.Files) {
	// No client certificate, or one from another CA: the handshake
	// fails; no call is made.
	for _, tc := range []struct {
		what  string
		certs []tls.Certificate
	}{{"no client certificate", nil}, {"a certificate from another CA", []tls.Certificate{strangerCert.TLS()}}} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", a.addr, &tls.Config{RootCAs: ca.Pool(), Certificates: tc.certs, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13})
		if err == nil {
			// TLS 1.3: the server's verdict on the client's
			// certificate arrives as an alert on the first read.
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: the TLS listener did not refuse it in the handshake: %v", tc.what, err)
		}
	}
	out, code := termctlTLS(t, a.addr, noCert, "status")
	t.Logf("no client certificate: exit %d: %s", code, out)
	if code == 0 {
		t.Errorf("termctl status without a client certificate succeeded:\n%s", out)
	}
	out, code = termctlTLS(t, a.addr, strangerFiles, "status")
	t.Logf("another CA's certificate: exit %d: %s", code, out)
	if code == 0 || !strings.Contains(out, "refused this client's certificate in the TLS handshake") {
		t.Errorf("termctl status with another CA's certificate succeeded:\n%s", out)
	}
	// agent-a is an agent on A...
	out, code = termctlTLS(t, a.addr, agentFiles, "status", "-o", "json")
	if code != 0 || !strings.Contains(out, `"role": "agent"`) {
		t.Fatalf("agent-a on host A: %d\n%s", code, out)
	}
	// ...and nothing on B, over the same CA.
	out, code = termctlTLS(t, b.addr, agentFiles, "status")
	t.Logf("agent-a on host B: exit %d: %s", code, out)
	if code == 0 || !strings.Contains(out, "maps to no principal") {
		t.Errorf("agent-a (mapped on host A only) on host B: %d, want a refusal naming the unmapped certificate:\n%s", code, out)
	}
	// An agent certificate cannot approve, not even its own plan: it
	// stays awaiting approval.
	out, code = termctlTLS(t, a.addr, agentFiles, "plan", "-o", "json", "--cwd", a.d.Workspace, "--", "touch", "agent-approves.txt")
	var p struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		Decision struct {
			RequestHash string `json:"request_hash"`
		} `json:"decision"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || code != 0 || p.ID == "" {
		t.Fatalf("agent-a plans on A: %d %v\n%s", code, err, out)
	}
	out, code = termctlTLS(t, a.addr, agentFiles, "approve", p.ID, "--hash", p.Decision.RequestHash)
	t.Logf("agent-a approving its own plan on A: exit %d: %s", code, out)
	if code == 0 {
		t.Errorf("agent-a approved a plan:\n%s", out)
	}
	got, err := a.d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: p.ID})
	if err != nil || got.Plan.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Errorf("after agent-a's attempt the plan is %v (%v), want still awaiting approval", got.GetPlan().GetState(), err)
	}
	if _, err := a.d.Client.Plans.DenyPlan(ctxT(t), &termdv1.DenyPlanRequest{PlanId: p.ID, Reason: "test: agent-approval probe"}); err != nil {
		t.Fatal(err)
	}
}

// startFleetGateway starts a gateway over every host with gateway-1's
// certificate, alice its operator by token, and waits until it has every
// host up.
func startFleetGateway(t *testing.T, dir string, hosts []*fleetHost, gwFiles testpki.Files) (g *fleetGW) {
	fleetFile := filepath.Join(dir, "fleet.yaml")
	ff := fmt.Sprintf("tls:\n  cert: %s\n  key: %s\n  ca: %s\nhosts:\n", gwFiles.Cert, gwFiles.Key, gwFiles.CA)
	for _, h := range hosts {
		ff += fmt.Sprintf("  - name: %s\n    address: %s\n", h.name, h.addr)
	}
	writeFile(t, fleetFile, ff)
	aliceToken := filepath.Join(dir, "alice.token")
	writeFile(t, aliceToken, "aliceFleetToken-0123456789abcdef0123456789abcdef0123456789\n")
	_ = os.Chmod(aliceToken, 0o600)
	gwConfig := filepath.Join(dir, "gateway.yaml")
	writeFile(t, gwConfig, fmt.Sprintf("tokens:\n  - {name: alice, token_file: %s, role: operator}\n", aliceToken))
	gp := harness.StartGateway(t, "--fleet", fleetFile, "--config", gwConfig)
	g = &fleetGW{t: t, url: gp.URL, token: "aliceFleetToken-0123456789abcdef0123456789abcdef0123456789"}
	waitUntil(t, "every host up at the gateway", func() (bool, string) {
		st := g.hostStates()
		return st["host-a"] == "up" && st["host-b"] == "up" && st["host-c"] == "up", fmt.Sprint(st)
	})
	return g
}

// agentPlan is an agent's plan on a host of the fleet, and the agent's
// connection to that host.
type agentPlan struct {
	h    *fleetHost
	plan *termdv1.Plan
	ag   *agentConn
}

// approveAgentPlansAcrossFleet: an agent on each host plans a write; the
// plans come to one queue at the gateway; A's is approved in the console (in
// Chromium), B's and C's over REST; each runs on its own host only, its
// receipt naming alice through gateway-1 as the approver.
func approveAgentPlansAcrossFleet(t *testing.T, br harness.Browser, g *fleetGW, names []string, hosts []*fleetHost) (plans []agentPlan) {
	for _, h := range hosts {
		ag := newAgentConn(t, h.d)
		p := ag.plan("touch", "from-agent-"+h.name+".txt")
		if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
			t.Fatalf("%s: the agent's touch is %s, want awaiting approval", h.name, p.State)
		}
		plans = append(plans, agentPlan{h, p, ag})
	}
	queue := map[string]string{} // plan id -> host
	waitUntil(t, "every agent's plan in the fleet queue", func() (bool, string) {
		q := g.call("GET", "/v1/fleet/plans", nil)
		for _, p := range q["plans"].([]any) {
			pm := p.(map[string]any)
			queue[fmt.Sprint(pm["id"])] = fmt.Sprint(pm["host"])
		}
		for _, p := range plans {
			if queue[p.plan.Id] != p.h.name {
				return false, fmt.Sprintf("plan %s of %s is in the queue as %q", p.plan.Id, p.h.name, queue[p.plan.Id])
			}
		}
		return true, ""
	})

	// Host A's plan: approved in the console, in Chromium.
	approveInBrowser(t, br, g, names, plans[0].h.name, plans[0].plan.Id)
	// B's and C's over REST, bound to the hash the queue showed.
	for _, p := range plans[1:] {
		g.call("POST", "/v1/hosts/"+p.h.name+"/plans/"+p.plan.Id+":approve", map[string]any{"request_hash": p.plan.Decision.RequestHash})
	}
	for _, p := range plans {
		ex := p.ag.executeAndWait(p.plan.Id)
		if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
			t.Fatalf("%s: the agent's approved touch ended %s: %s", p.h.name, ex.State, ex.Error)
		}
		for _, other := range hosts {
			_, err := os.Stat(filepath.Join(other.d.Workspace, "from-agent-"+p.h.name+".txt"))
			if (err == nil) != (other == p.h) {
				t.Errorf("%s's plan: file on %s: %v", p.h.name, other.name, err)
			}
		}
		rj := receiptJSON(t, p.h.d.Client, ex.ReceiptId)
		ap, _ := rj["approver"].(map[string]any)
		if ap["kind"] != "cert" || ap["gateway"] != "gateway-1" || !strings.Contains(fmt.Sprint(ap["name"]), "alice") {
			t.Errorf("%s: the receipt's approver is %v, want alice through the gateway-1 certificate", p.h.name, ap)
		}
	}
	return plans
}

// runLongCommandAcrossCut runs a long command on host c and cuts c's link
// while it runs: c is shown down, a and b are served meanwhile, and the
// command ends while cut off; the link is restored once the gateway's stream
// says c is down. It returns the command's end.
func runLongCommandAcrossCut(t *testing.T, g *fleetGW, stream *fleetStream, a, b, c *fleetHost, agC *agentConn) (fin *termdv1.Execution) {
	// Project code: a script in the workspace, run by its path.
	tick := filepath.Join(c.d.Workspace, "tick.sh")
	writeFile(t, tick, "#!/bin/sh\ni=0\nwhile [ ! -e stop ]; do i=$((i+1)); echo tick $i; sleep 0.2; done\necho stopped after $i\n")
	if err := os.Chmod(tick, 0o755); err != nil {
		t.Fatal(err)
	}
	long := agC.plan(tick)
	if long.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		g.call("POST", "/v1/hosts/host-c/plans/"+long.Id+":approve", map[string]any{"request_hash": long.Decision.RequestHash})
	}
	longExec := agC.execute(long.Id)
	// Running, and its output reaching the gateway's stream.
	waitUntil(t, "C's ticks in the gateway's stream", func() (bool, string) {
		evs, err := stream.snapshot()
		for _, e := range evs {
			if e.Data["host"] == "host-c" && strings.Contains(outputText(e), "tick 3") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, stream error %v", len(evs), err)
	})
	c.net.Cut()
	cutAt := time.Now()
	// C is shown down; A and B are served meanwhile.
	waitUntil(t, "host-c down at the gateway", func() (bool, string) {
		st := g.hostStates()
		return st["host-c"] == "down" && st["host-a"] == "up" && st["host-b"] == "up", fmt.Sprint(st)
	})
	duringCut := map[string][]string{}
	for _, h := range []*fleetHost{a, b} {
		duringCut[h.name] = append(duringCut[h.name], g.runOn(h.name, "during-cut.txt"))
	}
	// C's command ends while cut off: its end and receipt are events the
	// gateway has not seen.
	writeFile(t, filepath.Join(c.d.Workspace, "stop"), "")
	fin = waitFinal(t, c.d.Client, longExec)
	if fin.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("C's long command ended %s: %s", fin.State, fin.Error)
	}
	// The gateway's stream from C breaks (gRPC keepalive: no answer from
	// a host that is cut off) and the merged stream says so; only then is
	// the link restored, so what follows is a resume from C's last seq, not
	// a stalled connection carrying on.
	waitUntil(t, "the merged stream announces host-c down", func() (bool, string) {
		evs, _ := stream.snapshot()
		for _, e := range evs {
			if e.Kind == "host" && e.Data["name"] == "host-c" && e.Data["state"] == "down" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, no host-c down", len(evs))
	})
	c.net.Restore()
	t.Logf("host-c cut for %v", time.Since(cutAt).Round(time.Millisecond))
	return fin
}

// checkCutHostEventsArrive: every event of c's, from the first the stream
// delivered to the long command's receipt (fin), arrives through the
// gateway once, and the receipt is the gateway's to show.
func checkCutHostEventsArrive(t *testing.T, g *fleetGW, stream *fleetStream, c *fleetHost, fin *termdv1.Execution) {
	// Every event of C's, from the first the stream delivered of C to the
	// long command's receipt, arrives through the gateway: compared by
	// global_seq with C's own log.
	var fromGW map[uint64]int
	var first, last uint64
	waitUntil(t, "C's receipt through the gateway's stream after the link is back", func() (bool, string) {
		evs, _ := stream.snapshot()
		fromGW, first, last = map[uint64]int{}, 0, 0
		for _, e := range evs {
			if e.Data["host"] != "host-c" || e.Kind == "host" {
				continue
			}
			s := gseq(e.Data)
			if s == 0 {
				continue // not a daemon event
			}
			fromGW[s]++
			if first == 0 || s < first {
				first = s
			}
			if r, ok := e.Data["receipt"].(map[string]any); ok && r["id"] == fin.ReceiptId {
				last = s
			}
		}
		return last != 0, fmt.Sprintf("%d events of host-c so far", len(fromGW))
	})
	own := ownEvents(t, c.d, first, last)
	var missing []uint64
	for _, s := range own {
		if fromGW[s] == 0 {
			missing = append(missing, s)
		}
	}
	dups := 0
	for _, n := range fromGW {
		if n > 1 {
			dups++
		}
	}
	if len(missing) > 0 || dups > 0 || len(own) == 0 {
		t.Errorf("host-c: of its own %d events (global_seq %d..%d), %d did not arrive through the gateway (%v); %d arrived twice", len(own), first, last, len(missing), missing, dups)
	}
	t.Logf("host-c: %d events from %d to %d all arrived through the gateway's stream", len(own), first, last)
	// The receipt is the gateway's to show too.
	if r := g.call("GET", "/v1/hosts/host-c/receipts/"+fin.ReceiptId, nil); !strings.Contains(fmt.Sprint(r["receipt_json"]), fin.ReceiptId) {
		t.Errorf("C's receipt through the gateway: %v", r)
	}
}

// checkCollectorHoldsEveryReceipt: the collector holds every receipt of
// every host, each verifying offline with its host's key.
func checkCollectorHoldsEveryReceipt(t *testing.T, col *harness.Collector, hosts []*fleetHost) {
	// --- The collector holds every receipt of every host, each verifying
	// offline with its host's key ---
	var oh []*otlpHost
	for _, h := range hosts {
		oh = append(oh, &otlpHost{name: h.name, d: h.d})
	}
	waitUntil(t, "every host's chain in the collector's output", func() (bool, string) {
		recs, err := col.Records()
		if err != nil {
			return false, err.Error()
		}
		got := map[string]bool{}
		for _, r := range recs {
			got[r.Resource["host.name"]+" "+r.Attrs["termd.receipt.id"]] = true
		}
		var miss []string
		for _, h := range oh {
			for id := range h.chainIDs(t) {
				if !got[h.name+" "+id] {
					miss = append(miss, h.name+":"+id)
				}
			}
		}
		return len(miss) == 0, fmt.Sprintf("missing %v", miss)
	})
	recs, err := col.Records()
	if err != nil {
		t.Fatal(err)
	}
	verifyCollectorOffline(t, oh, recs, 2)
}

// ownEvents are the global_seqs of d's events from..to, read from d's own
// all-sessions stream on its unix socket (history).
func ownEvents(t *testing.T, d *harness.Daemon, from, to uint64) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := d.Client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SinceSeq: from - 1, History: from == 1})
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("C's own events after %d: %v", from-1, err)
		}
		s := m.GetEvent().GetGlobalSeq()
		if s > to {
			break
		}
		out = append(out, s)
		if s == to {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// approveInBrowser approves plan id of host in the gateway's console, in
// real headless Chromium (web/e2e/fleet-e2e.test.mjs), as the person whose
// token g holds.
func approveInBrowser(t *testing.T, br harness.Browser, g *fleetGW, hosts []string, host, id string) {
	t.Helper()
	cmd := exec.Command(br.Node, "fleet-e2e.test.mjs")
	cmd.Dir = br.Dir
	cmd.Env = append(os.Environ(), "TERMD_CONSOLE_URL="+g.url, "TERMD_CONSOLE_TOKEN="+g.token, "CHROMIUM="+br.Chromium,
		"TERMD_FLEET_HOSTS="+strings.Join(hosts, ","), "TERMD_FLEET_HOST="+host, "TERMD_FLEET_PLAN="+id)
	out, err := cmd.CombinedOutput()
	t.Logf("fleet-e2e.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("approving %s's plan %s in the console failed: %v", host, id, err)
	}
}

// agentConn is an agent (uid 65534) on a host's unix socket.
type agentConn struct {
	t *testing.T
	d *harness.Daemon
	c *client.Client
}

func newAgentConn(t *testing.T, d *harness.Daemon) *agentConn {
	return &agentConn{t: t, d: d, c: agentClient(t, d, harness.Nobody)}
}

func (a *agentConn) plan(argv ...string) *termdv1.Plan {
	a.t.Helper()
	return plan(a.t, a.c, "", argv...)
}

// execute starts an approved plan and returns its execution id.
func (a *agentConn) execute(planID string) string {
	a.t.Helper()
	r, err := a.c.Executions.Execute(ctxT(a.t), &termdv1.ExecuteRequest{PlanId: planID})
	if err != nil {
		a.t.Fatalf("the agent's execute of %s: %v", planID, err)
	}
	return r.Execution.Id
}

func (a *agentConn) executeAndWait(planID string) *termdv1.Execution {
	a.t.Helper()
	return waitFinal(a.t, a.d.Client, a.execute(planID))
}

// TestFleetDocCertificates runs the openssl commands of docs/FLEET.md as
// written (the server certificate's address changed to this test's
// loopback) and serves termd's mutual-TLS listener with what they made:
// the gateway's and the agent's certificates are accepted with the roles
// the doc's mapping gives them.
func TestFleetDocCertificates(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		harness.Missing(t, "openssl is not installed: run scripts/ci-deps.sh")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "FLEET.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "### With openssl")
	_, block, ok2 := strings.Cut(after, "```sh\n")
	script, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 || !strings.Contains(script, "IP:10.0.0.1") {
		t.Fatalf("docs/FLEET.md has no openssl block with the example address IP:10.0.0.1 under \"### With openssl\"")
	}
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	cmd := exec.Command("sh", "-e", "-c", strings.ReplaceAll(script, "IP:10.0.0.1", "IP:127.0.0.1"))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the openssl commands of docs/FLEET.md failed: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	f := func(n string) string { return filepath.Join(dir, n) }
	harness.Start(t, harness.Options{Config: fmt.Sprintf(`listen_tls:
  address: %s
  cert_file: %s
  key_file: %s
  client_ca_file: %s
  clients:
    - {name: gateway-1, cn: gateway-1, role: operator, gateway: true}
    - {name: ci-agent, cn: ci-agent, role: agent, run_as: nobody}
    - {name: build1-as-client, cn: build1, role: viewer}
`, addr, f("build1.crt"), f("build1.key"), f("fleet-ca.crt"))})
	for _, c := range []struct{ name, role string }{{"gateway-1", "operator"}, {"ci-agent", "agent"}} {
		out, code := termctlTLS(t, addr, testpki.Files{Cert: f(c.name + ".crt"), Key: f(c.name + ".key"), CA: f("fleet-ca.crt")}, "status", "-o", "json")
		if code != 0 || !strings.Contains(out, `"role": "`+c.role+`"`) {
			t.Errorf("%s's certificate from the doc's commands: %d, want role %s:\n%s", c.name, code, c.role, out)
		}
	}
	// A server certificate (extendedKeyUsage serverAuth only) is no client
	// certificate, even with an entry that maps its CN.
	if out, code := termctlTLS(t, addr, testpki.Files{Cert: f("build1.crt"), Key: f("build1.key"), CA: f("fleet-ca.crt")}, "status"); code == 0 {
		t.Errorf("a serverAuth-only certificate was accepted as a client:\n%s", out)
	}
}
