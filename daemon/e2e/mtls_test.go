package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/harness"
	"github.com/termd/termd/internal/testpki"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// fleetPKI is one fleet's CA, a server certificate for 127.0.0.1 and the
// client certificates of the tests, written as PEM files.
type fleetPKI struct {
	ca     *testpki.CA
	dir    string
	server testpki.Files
}

func newFleetPKI(t *testing.T) *fleetPKI {
	t.Helper()
	p := &fleetPKI{ca: testpki.MustCA("fleet CA"), dir: t.TempDir()}
	srv, err := p.ca.Server("termd", []net.IP{net.ParseIP("127.0.0.1")}, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if p.server, err = srv.WriteAll(p.dir, "server", p.ca); err != nil {
		t.Fatal(err)
	}
	return p
}

// client issues a client certificate (subject CN cn, URI SANs uris) and
// writes it with the CA that verifies termd's server certificate.
func (p *fleetPKI) client(t *testing.T, cn string, uris ...string) *client.TLS {
	t.Helper()
	c, err := p.ca.Client(cn, uris...)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.WriteAll(p.dir, "client-"+cn+strconv.Itoa(len(uris)), p.ca)
	if err != nil {
		t.Fatal(err)
	}
	return &client.TLS{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}
}

// config is a termd config with listen_tls at addr mapping clients (YAML
// flow mappings, one per line).
func (p *fleetPKI) config(addr, metrics string, clients ...string) string {
	s := fmt.Sprintf("metrics_listen: %q\nlisten_tls:\n  address: %q\n  cert_file: %q\n  key_file: %q\n  client_ca_file: %q\n  clients:\n",
		metrics, addr, p.server.Cert, p.server.Key, p.server.CA)
	for _, c := range clients {
		s += "    - " + c + "\n"
	}
	return s
}

func dialCert(t *testing.T, addr string, files *client.TLS, o client.Options) *client.Client {
	t.Helper()
	o.TLS = files
	c, err := client.Dial("tls://"+addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

const (
	agentEntry  = `{name: agent-a, cn: agent-a, role: agent, run_as: daemon}`
	viewerEntry = `{name: viewer-a, cn: viewer-a, role: viewer}`
	opsEntry    = `{name: ops-a, cn: ops-a, role: operator}`
	gwEntry     = `{name: gw-1, uri: "spiffe://fleet/gateway", role: operator, gateway: true}`
)

// A client with no certificate, or with one from another CA, is refused in
// the TLS handshake: no call reaches termd (termd_tls_calls stays 0 while
// termd_tls_handshakes_refused counts them).
func TestTLSHandshakeRefusesMissingOrForeignCert(t *testing.T) {
	p := newFleetPKI(t)
	addr, maddr := freeAddr(t), freeAddr(t)
	harness.Start(t, harness.Options{Config: p.config(addr, maddr, opsEntry)})

	// No client certificate at all.
	bare, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: p.ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	_, err = termdv1.NewDaemonServiceClient(bare).GetStatus(ctxT(t), &termdv1.GetStatusRequest{})
	if code := client.Code(err); code != codes.Unavailable {
		t.Fatalf("a client without a certificate: %v (code %v), want the handshake refused", err, code)
	}

	// A certificate with the same subject as a mapped one, from another CA.
	other := &fleetPKI{ca: testpki.MustCA("other CA"), dir: t.TempDir()}
	forged := other.client(t, "ops-a")
	forged.CAFile = p.server.CA // it trusts the real server
	_, err = dialCert(t, addr, forged, client.Options{}).Daemon.GetStatus(ctxT(t), &termdv1.GetStatusRequest{})
	if code := client.Code(err); code != codes.Unauthenticated || !strings.Contains(err.Error(), "client_ca_file") {
		t.Fatalf("a certificate from another CA: %v (code %v), want the handshake refused with a hint at client_ca_file", err, code)
	}
	if n := metric(t, maddr, "termd_tls_handshakes_refused"); n < 2 {
		t.Fatalf("termd_tls_handshakes_refused = %v, want both handshakes counted", n)
	}
	if n := metric(t, maddr, "termd_tls_calls"); n != 0 {
		t.Fatalf("termd_tls_calls = %v: a call reached termd without a valid client certificate", n)
	}
	// The mapped certificate is served, and counted.
	st, err := dialCert(t, addr, p.client(t, "ops-a"), client.Options{}).Daemon.GetStatus(ctxT(t), &termdv1.GetStatusRequest{})
	if err != nil || st.Caller.GetName() != "ops-a" || st.Caller.GetCert() != "ops-a" || st.Caller.GetRole() != termdv1.Role_ROLE_OPERATOR {
		t.Fatalf("the mapped operator certificate: %v %v", st.GetCaller(), err)
	}
	if n := metric(t, maddr, "termd_tls_calls"); n != 1 {
		t.Fatalf("termd_tls_calls = %v after one call", n)
	}
}

// A verified certificate maps to exactly what listen_tls.clients says: an
// unmapped one is refused naming its subject and the key to add; a viewer
// cannot plan; an agent plans and its command runs as its run_as user, and
// it cannot approve; an operator certificate that is not a gateway's cannot
// speak for someone else (x-termd-name).
func TestTLSCertMapsToPrincipal(t *testing.T) {
	requireRoot(t)
	runAs, err := user.Lookup("daemon")
	if err != nil {
		t.Fatalf("the test's run_as user: %v", err)
	}
	p := newFleetPKI(t)
	addr, maddr := freeAddr(t), freeAddr(t)
	d := harness.Start(t, harness.Options{
		Config: p.config(addr, maddr, agentEntry, viewerEntry, opsEntry),
		Policy: testPolicy(`  - {id: test.ask, program: sh, exact: [sh, -c, "id -u"], decision: ask, risk: medium, reason: "test: needs approval"}`),
	})

	_, err = dialCert(t, addr, p.client(t, "stranger"), client.Options{}).Daemon.GetStatus(ctxT(t), &termdv1.GetStatusRequest{})
	if client.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `CN=stranger`) || !strings.Contains(err.Error(), "listen_tls.clients") {
		t.Fatalf("an unmapped certificate: %v, want PermissionDenied naming CN=stranger and listen_tls.clients", err)
	}

	viewer := dialCert(t, addr, p.client(t, "viewer-a"), client.Options{})
	if _, err := viewer.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"id", "-u"}}}); client.Code(err) != codes.PermissionDenied {
		t.Fatalf("a viewer certificate planned: %v", err)
	}

	agent := dialCert(t, addr, p.client(t, "agent-a"), client.Options{})
	pl := plan(t, agent, "", "id", "-u")
	if pl.Requester.GetCert() != "agent-a" || pl.Requester.GetName() != "agent-a" || strconv.Itoa(int(pl.Requester.GetUid())) != runAs.Uid {
		t.Fatalf("the agent certificate's principal: %v (run_as daemon is uid %s)", pl.Requester, runAs.Uid)
	}
	_, rec, out, errOut := runToEnd(t, agent, pl)
	if strings.TrimSpace(out) != runAs.Uid {
		t.Fatalf("the agent certificate's command ran as uid %q, want %s (run_as daemon); stderr %q", out, runAs.Uid, errOut)
	}
	rc := receiptJSON(t, d.Client, rec.Id)
	req := rc["requester"].(map[string]any)
	if req["kind"] != "cert" || req["id"] != "cert:agent-a" || fmt.Sprint(rc["run_as"].(map[string]any)["uid"]) != runAs.Uid {
		t.Fatalf("the receipt's requester %v, run_as %v", req, rc["run_as"])
	}

	// A local socket user with the run_as uid owns none of it: the
	// certificate's principal is cert:agent-a, not uid:1.
	if rc["requester"].(map[string]any)["id"] == "uid:"+runAs.Uid {
		t.Fatal("the certificate's principal aliases the local uid")
	}

	ask := plan(t, agent, pl.SessionId, "sh", "-c", "id -u")
	if ask.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("plan state %v, want awaiting approval", ask.State)
	}
	_, err = agent.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: ask.Id, RequestHash: ask.Decision.RequestHash})
	if client.Code(err) != codes.PermissionDenied {
		t.Fatalf("an agent certificate approved a plan: %v", err)
	}

	named := dialCert(t, addr, p.client(t, "ops-a"), client.Options{Name: "token:alice", Via: "gateway"})
	_, err = named.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: ask.Id, RequestHash: ask.Decision.RequestHash})
	if client.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "gateway") {
		t.Fatalf("a non-gateway operator certificate naming a person: %v, want PermissionDenied", err)
	}
	got, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: ask.Id})
	if err != nil || got.Plan.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("the plan after refused approvals: %v %v", got.GetPlan().GetState(), err)
	}
}

// Two hosts with their own listen_tls.clients: a certificate host A maps
// has no standing on host B, although both trust the same fleet CA.
func TestTLSCertHasNoStandingOnAnotherHost(t *testing.T) {
	p := newFleetPKI(t)
	addrA, addrB := freeAddr(t), freeAddr(t)
	a := harness.Start(t, harness.Options{Config: p.config(addrA, freeAddr(t), opsEntry)})
	b := harness.Start(t, harness.Options{Config: p.config(addrB, freeAddr(t), `{name: ops-b, cn: ops-b, role: operator}`)})
	opsA := p.client(t, "ops-a")
	// termctl reaches host A with host A's operator certificate.
	remote := []string{"--daemon", "tls://" + addrA, "--tls-cert", opsA.CertFile, "--tls-key", opsA.KeyFile, "--tls-ca", opsA.CAFile}
	out, errOut, code := a.Run("termctl", append(remote, "status", "-o", "json")...)
	if code != 0 || !strings.Contains(out, `"name": "ops-a"`) || !strings.Contains(out, `"role": "operator"`) {
		t.Fatalf("termctl status over mutual TLS: exit %d\n%s%s", code, out, errOut)
	}
	// termctl plan over mutual TLS opens the certificate's own session, not
	// the one root's local termctl holds (termctl runs as root here too).
	local, errOut, code := a.Run("termctl", "plan", "-o", "json", "--", "id", "-u")
	if code != 0 {
		t.Fatalf("local termctl plan: %d %s", code, errOut)
	}
	viaTLS, errOut, code := a.Run("termctl", append(remote, "plan", "-o", "json", "--", "id", "-u")...)
	if code != 0 {
		t.Fatalf("termctl plan over mutual TLS: %d %s", code, errOut)
	}
	var lp, rp struct {
		SessionID string `json:"session_id"`
		Requester struct {
			Name string `json:"name"`
		} `json:"requester"`
	}
	if err := json.Unmarshal([]byte(local), &lp); err != nil || lp.SessionID == "" {
		t.Fatalf("local plan JSON: %v\n%s", err, local)
	}
	if err := json.Unmarshal([]byte(viaTLS), &rp); err != nil || rp.SessionID == "" {
		t.Fatalf("remote plan JSON: %v\n%s", err, viaTLS)
	}
	if rp.SessionID == lp.SessionID || rp.Requester.Name != "ops-a" {
		t.Fatalf("the certificate's plan went into session %s by %q; root's local session is %s", rp.SessionID, rp.Requester.Name, lp.SessionID)
	}
	// The same certificate has no standing on host B.
	_, errOut, code = b.RunEnv("termctl", []string{"TERMD_ADDR=tls://" + addrB, "TERMD_TLS_CERT=" + opsA.CertFile, "TERMD_TLS_KEY=" + opsA.KeyFile, "TERMD_TLS_CA=" + opsA.CAFile}, "status")
	if code == 0 || !strings.Contains(errOut, "CN=ops-a") || !strings.Contains(errOut, "listen_tls.clients") {
		t.Fatalf("termctl status on host B with host A's certificate: exit %d %q", code, errOut)
	}
	onB := dialCert(t, addrB, opsA, client.Options{})
	_, err := onB.Sessions.ListSessions(ctxT(t), &termdv1.ListSessionsRequest{})
	if client.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "CN=ops-a") {
		t.Fatalf("host A's operator certificate on host B: %v, want PermissionDenied", err)
	}
	if _, err := dialCert(t, addrB, p.client(t, "ops-b"), client.Options{}).Daemon.GetStatus(ctxT(t), &termdv1.GetStatusRequest{}); err != nil {
		t.Fatalf("host B's operator on host B: %v", err)
	}
	// Unless host B's operator maps it: a reload (SIGHUP) applies the
	// mapping to the connection already open.
	if err := os.WriteFile(b.ConfigPath, []byte(p.config(addrB, freeAddr(t), `{name: ops-b, cn: ops-b, role: operator}`, `{name: ops-a-on-b, cn: ops-a, role: viewer}`)), 0o600); err != nil {
		t.Fatal(err)
	}
	b.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := onB.Daemon.GetStatus(ctxT(t), &termdv1.GetStatusRequest{})
		if err == nil {
			if st.Caller.GetName() != "ops-a-on-b" || st.Caller.GetRole() != termdv1.Role_ROLE_VIEWER {
				t.Fatalf("after the reload host B maps the certificate to %v", st.Caller)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host B did not apply the reloaded mapping: %v\n%s", err, b.Log())
		}
	}
}

// A person approving at a gateway that holds a gateway certificate is
// recorded with the gateway: in the plan's approval, in the approved event
// and in the signed receipt (schema 1.7).
func TestTLSGatewayApprovalRecordsPersonAndGateway(t *testing.T) {
	p := newFleetPKI(t)
	addr := freeAddr(t)
	d := harness.Start(t, harness.Options{
		Config: p.config(addr, freeAddr(t), agentEntry, gwEntry),
		Policy: testPolicy(`  - {id: test.ask, program: sh, exact: [sh, -c, "echo approved"], decision: ask, risk: medium, reason: "test: needs approval"}`),
	})
	agent := dialCert(t, addr, p.client(t, "agent-a"), client.Options{})
	ask := plan(t, agent, "", "sh", "-c", "echo approved")
	if ask.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("plan state %v, want awaiting approval", ask.State)
	}
	gw := dialCert(t, addr, p.client(t, "gateway-1", "spiffe://fleet/gateway"), client.Options{Name: "token:alice", Via: "gateway"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	events, err := gw.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SessionId: ask.SessionId, History: true})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := gw.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: ask.Id, RequestHash: ask.Decision.RequestHash})
	if err != nil {
		t.Fatal(err)
	}
	who := ap.Plan.GetApproval().GetApprover()
	if who.GetName() != "token:alice" || who.GetGateway() != "gw-1" || who.GetCert() != "gw-1" {
		t.Fatalf("the plan's approver %v, want token:alice through gw-1", who)
	}
	for {
		m, err := events.Recv()
		if err != nil {
			t.Fatalf("no approved event: %v", err)
		}
		if m.Event.Kind == termdv1.EventKind_EVENT_KIND_APPROVED {
			if a := m.Event.GetPlan().GetApproval().GetApprover(); a.GetName() != "token:alice" || a.GetGateway() != "gw-1" {
				t.Fatalf("the approved event's approver %v", a)
			}
			break
		}
	}
	_, rec, out, _ := runToEnd(t, agent, ask)
	if strings.TrimSpace(out) != "approved" {
		t.Fatalf("output %q", out)
	}
	if !strings.Contains(rec.Approver, "token:alice") || !strings.Contains(rec.Approver, "gw-1") {
		t.Fatalf("the receipt summary's approver %q", rec.Approver)
	}
	r, err := d.Client.Receipts.GetReceipt(ctxT(t), &termdv1.GetReceiptRequest{ReceiptId: rec.Id})
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.Client.Receipts.VerifyReceipt(ctxT(t), &termdv1.VerifyReceiptRequest{ReceiptJson: r.ReceiptJson})
	if err != nil || !v.Valid {
		t.Fatalf("the receipt does not verify: %v %v", v, err)
	}
	rc := receiptJSON(t, d.Client, rec.Id)
	a := rc["approver"].(map[string]any)
	if rc["schema_version"] != "1.7" || a["kind"] != "cert" || a["gateway"] != "gw-1" || !strings.HasPrefix(fmt.Sprint(a["name"]), "token:alice") || a["id"] != "cert:gw-1/token:alice" {
		t.Fatalf("the receipt's approver %v (schema %v)", a, rc["schema_version"])
	}
}

// The TCP listener is bounded like the socket before any TLS work: one
// source address holds at most connections.per_uid connections (the rest
// are closed at accept), a connection that never finishes its handshake is
// closed after connections.handshake_timeout, and a certificate holder is
// served afterwards.
func TestTLSConnectionsBoundedPerAddress(t *testing.T) {
	p := newFleetPKI(t)
	addr, maddr := freeAddr(t), freeAddr(t)
	harness.Start(t, harness.Options{Config: p.config(addr, maddr, opsEntry) + "connections:\n  per_uid: 4\n  handshake_timeout: 1s\n"})
	var conns []net.Conn
	for i := 0; i < 12; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	closed := 0
	for _, c := range conns {
		// Each is closed by termd: at accept (over per_uid) or when its
		// handshake does not come (handshake_timeout).
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil && !errorsIsTimeout(err) {
			closed++
		}
	}
	if closed != len(conns) {
		t.Fatalf("%d of %d silent connections were closed by termd", closed, len(conns))
	}
	if n := metric(t, maddr, "termd_connections_refused"); n < 12-4 {
		t.Fatalf("termd_connections_refused = %v, want the %d connections over connections.per_uid refused at accept", n, 12-4)
	}
	if n := metric(t, maddr, "termd_tls_calls"); n != 0 {
		t.Fatalf("termd_tls_calls = %v", n)
	}
	if _, err := dialCert(t, addr, p.client(t, "ops-a"), client.Options{}).Daemon.GetStatus(ctxT(t), &termdv1.GetStatusRequest{}); err != nil {
		t.Fatalf("the operator certificate after the silent connections: %v", err)
	}
}

func errorsIsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
