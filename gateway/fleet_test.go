package gateway_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/gateway"
	"github.com/termd/termd/internal/harness"
	"github.com/termd/termd/internal/testpki"
)

// planOn asks host (through the gateway, as the operator) for a write in
// confirm mode: a plan awaiting approval.
func (e *env) planOn(hostName, file string) (id, hash string) {
	e.t.Helper()
	p := e.call("POST", "/v1/hosts/"+hostName+"/plans", map[string]any{"request": map[string]any{"argv": []string{"touch", file}, "mode": "MODE_CONFIRM"}})["plan"]
	if st := str(p, "state"); st != "PLAN_STATE_AWAITING_APPROVAL" {
		e.t.Fatalf("touch %s on %s: state %s, want awaiting approval", file, hostName, st)
	}
	return str(p, "id"), str(p, "decision", "request_hash")
}

// runOn executes an approved plan on host and waits for its receipt.
func (e *env) runOn(hostName, planID string) map[string]any {
	e.t.Helper()
	x := e.call("POST", "/v1/hosts/"+hostName+"/plans/"+planID+":execute", map[string]any{})["execution"]
	for deadline := time.Now().Add(60 * time.Second); str(x, "receipt_id") == ""; time.Sleep(50 * time.Millisecond) {
		x = e.call("GET", "/v1/hosts/"+hostName+"/executions/"+str(x, "id"), nil)["execution"]
		if time.Now().After(deadline) {
			e.t.Fatalf("execution on %s did not finish: %v", hostName, x)
		}
	}
	return x.(map[string]any)
}

// hostsByName is GET /v1/hosts keyed by name.
func (e *env) hostsByName() map[string]map[string]any {
	e.t.Helper()
	out := map[string]map[string]any{}
	for _, h := range e.call("GET", "/v1/hosts", nil)["hosts"].([]any) {
		out[str(h, "name")] = h.(map[string]any)
	}
	return out
}

// One gateway, three daemons: each host's routes under /v1/hosts/NAME/,
// one approval queue with every host's plans, approval carried to the
// owning host bound to the hash shown, and a stopped host listed as down
// while the others are served.
func TestFleetRoutesAndQueue(t *testing.T) {
	e := newEnv(t, envOpts{fleet: []string{"a", "b", "c"}})
	hs := e.hostsByName()
	if len(hs) != 3 {
		t.Fatalf("GET /v1/hosts: %v", hs)
	}
	for _, n := range []string{"a", "b", "c"} {
		if str(hs[n], "state") != "up" || str(hs[n], "address") != e.hosts[n].Socket || dig(hs[n], "default") != (n == "a") {
			t.Errorf("host %s: %v", n, hs[n])
		}
	}

	ids, hashes := map[string]string{}, map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		ids[n], hashes[n] = e.planOn(n, "from-"+n+".txt")
	}
	// The fleet queue holds every host's plan, each with its host.
	q := e.call("GET", "/v1/fleet/plans", nil)
	got := map[string]string{}
	for _, p := range q["plans"].([]any) {
		got[str(p, "id")] = str(p, "host")
	}
	for n, id := range ids {
		if got[id] != n {
			t.Errorf("plan %s of host %s: in the queue as host %q (queue %v)", id, n, got[id], got)
		}
	}
	// Filtered by host.
	q = e.call("GET", "/v1/fleet/plans?host=b", nil)
	if ps := q["plans"].([]any); len(ps) != 1 || str(ps[0], "id") != ids["b"] || len(q["hosts"].([]any)) != 1 {
		t.Errorf("?host=b: %v", q)
	}
	if code, body := status(t, e.do("GET", "/v1/fleet/plans?host=nope", e.Operator, nil)); code != 400 || !strings.Contains(body, `\"nope\" is not in this gateway's fleet`) {
		t.Errorf("?host=nope: %d %s", code, body)
	}
	if code, body := status(t, e.do("GET", "/v1/hosts/nope/status", e.Operator, nil)); code != 404 || !strings.Contains(body, "GET /v1/hosts lists them") {
		t.Errorf("unknown host: %d %s", code, body)
	}
	// Each host's own event stream, as /v1/events is for one daemon.
	s := e.openSSE("/v1/hosts/c/events?history=1", e.Operator)
	for {
		ev := s.nextEvent(t)
		var d map[string]any
		_ = json.Unmarshal([]byte(ev.Data), &d)
		pid := str(d, "plan", "id")
		if pid == ids["a"] || pid == ids["b"] {
			t.Fatalf("host c's stream carries another host's plan: %s", ev.Data)
		}
		if pid == ids["c"] && ev.Event == "EVENT_KIND_AWAITING_APPROVAL" {
			break
		}
	}
	s.res.Body.Close()
	// Unprefixed routes are the default host's.
	if p := e.call("GET", "/v1/plans/"+ids["a"], nil); str(p, "plan", "id") != ids["a"] {
		t.Errorf("unprefixed GET of a's plan: %v", p)
	}
	if code, _ := status(t, e.do("GET", "/v1/plans/"+ids["b"], e.Operator, nil)); code != 404 {
		t.Errorf("unprefixed GET of b's plan: %d, want 404 (it is on b)", code)
	}

	// Approve b's plan on b: a wrong hash is refused, the hash shown is
	// taken; it runs on b only, and b's receipt names the person.
	if code, body := status(t, e.do("POST", "/v1/hosts/b/plans/"+ids["b"]+":approve", e.Operator, map[string]any{"request_hash": hashes["a"]})); code < 400 {
		t.Errorf("approve b's plan with a's hash: %d %s", code, body)
	}
	if code, _ := status(t, e.do("POST", "/v1/hosts/b/plans/"+ids["b"]+":approve", e.Viewer, map[string]any{"request_hash": hashes["b"]})); code != 403 {
		t.Errorf("viewer approve on b: %d, want 403", code)
	}
	p := e.call("POST", "/v1/hosts/b/plans/"+ids["b"]+":approve", map[string]any{"request_hash": hashes["b"]})["plan"]
	if str(p, "state") != "PLAN_STATE_APPROVED" || str(p, "approval", "approver", "name") != "token:alice" || str(p, "approval", "approver", "via") != "gateway" {
		t.Fatalf("approve on b: %v", p)
	}
	x := e.runOn("b", ids["b"])
	rid := str(x, "receipt_id")
	if str(x, "state") != "EXECUTION_STATE_SUCCEEDED" {
		t.Fatalf("execution on b: %v", x)
	}
	if _, err := os.Stat(filepath.Join(e.hosts["b"].Workspace, "from-b.txt")); err != nil {
		t.Errorf("b's file: %v", err)
	}
	for _, n := range []string{"a", "c"} {
		if _, err := os.Stat(filepath.Join(e.hosts[n].Workspace, "from-b.txt")); err == nil {
			t.Errorf("b's plan ran on %s", n)
		}
	}
	rj := str(e.call("GET", "/v1/hosts/b/receipts/"+rid, nil), "receipt_json")
	var rc struct {
		Approver struct{ Kind, Name string }
	}
	if err := json.Unmarshal([]byte(rj), &rc); err != nil || rc.Approver.Name != "token:alice via gateway" || !strings.Contains(rj, hashes["b"]) {
		t.Errorf("b's receipt: approver %+v (%v), want token:alice via gateway (the person, through the gateway) and the hash shown: %.300s", rc.Approver, err, rj)
	}
	if code, _ := status(t, e.do("GET", "/v1/hosts/a/receipts/"+rid, e.Operator, nil)); code != 404 {
		t.Errorf("b's receipt on a: %d, want 404", code)
	}

	// c stops: listed as down with its error; the queue still answers with
	// a's plan and says c did not; a and b are served.
	e.hosts["c"].Stop()
	hs = e.hostsByName()
	if str(hs["c"], "state") != "down" || str(hs["c"], "error") == "" || str(hs["a"], "state") != "up" || str(hs["b"], "state") != "up" {
		t.Errorf("after c stopped: %v", hs)
	}
	q = e.call("GET", "/v1/fleet/plans", nil)
	if ps := q["plans"].([]any); len(ps) != 1 || str(ps[0], "id") != ids["a"] {
		t.Errorf("queue with c down: %v", q["plans"])
	}
	for _, h := range q["hosts"].([]any) {
		if down := str(h, "name") == "c"; down != (str(h, "error") != "") || down != (str(h, "state") == "down") {
			t.Errorf("queue's host %v", h)
		}
	}
	if code, body := status(t, e.do("GET", "/v1/hosts/c/status", e.Operator, nil)); code != 503 {
		t.Errorf("c's status while c is down: %d %s, want 503", code, body)
	}
	if st := e.call("GET", "/v1/hosts/b/status", nil); str(st, "caller", "name") != "token:alice" {
		t.Errorf("b's status while c is down: %v", st)
	}
}

// fleetPos is one host's position as a merged stream's id states it.
type fleetPos struct {
	epoch string
	seq   uint64
}

func parseFleetID(t *testing.T, id string) map[string]fleetPos {
	t.Helper()
	out := map[string]fleetPos{}
	for _, part := range strings.Split(id, ",") {
		name, pos, _ := strings.Cut(part, "=")
		epoch, seq, ok := strings.Cut(pos, ".")
		n, err := strconv.ParseUint(seq, 10, 64)
		if !ok || err != nil {
			t.Fatalf("merged stream id %q: bad entry %q", id, part)
		}
		out[name] = fleetPos{epoch, n}
	}
	return out
}

// fleetWatch reads a merged stream and checks that every host's events
// arrive in global_seq order with none missing: each event's seq is one
// more than the last one of its host's run, and the id states it.
type fleetWatch struct {
	t      *testing.T
	s      *sseReader
	last   map[string]fleetPos
	lastID string
	count  map[string]int
	// deadline bounds the wait of until: heartbeats alone never end it.
	deadline time.Time
}

func (w *fleetWatch) next() (sseEvent, map[string]any) {
	w.t.Helper()
	var ev sseEvent
	for ev.Event == "" && ev.Data == "" {
		if time.Now().After(w.deadline) {
			w.t.Fatalf("no event within 90s (last id %s)", w.lastID)
		}
		ev = w.s.next(w.t)
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
		w.t.Fatalf("event %q: %v in %s", ev.Event, err, ev.Data)
	}
	if ev.ID == "" {
		w.t.Fatalf("merged stream event %s has no id", ev.Event)
	}
	ids := parseFleetID(w.t, ev.ID)
	w.lastID = ev.ID
	h := str(data, "host")
	if h == "" {
		h = str(data, "name") // event: host
	}
	got := ids[h]
	switch {
	case ev.Event == "host":
		prev, seen := w.last[h]
		if seen && dig(data, "restarted") != true && got != prev {
			w.t.Errorf("host %s %s: its position moved from %v to %v without a restart", h, str(data, "state"), prev, got)
		}
		if str(data, "state") == "up" {
			w.last[h] = got
		}
	default:
		seq, _ := strconv.ParseUint(str(data, "global_seq"), 10, 64)
		prev, ok := w.last[h]
		if !ok {
			w.t.Fatalf("event of host %s before the host was announced up: %s", h, ev.Data)
		}
		if got.epoch != prev.epoch || seq != prev.seq+1 || got.seq != seq {
			w.t.Fatalf("host %s: event global_seq %d (id %s), want %d in run %s: an event was missed or repeated", h, seq, ev.ID, prev.seq+1, prev.epoch)
		}
		w.last[h] = got
		w.count[h]++
	}
	return ev, data
}

// until reads events until one of host h satisfies ok.
func (w *fleetWatch) until(what string, ok func(ev sseEvent, data map[string]any) bool) map[string]any {
	w.t.Helper()
	w.deadline = time.Now().Add(90 * time.Second)
	for i := 0; i < 500; i++ {
		ev, data := w.next()
		if ok(ev, data) {
			return data
		}
	}
	w.t.Fatalf("no %s in 500 events", what)
	return nil
}

func (w *fleetWatch) hostState(h, state string) map[string]any {
	w.t.Helper()
	return w.until("host "+h+" "+state, func(ev sseEvent, d map[string]any) bool {
		return ev.Event == "host" && str(d, "name") == h && str(d, "state") == state
	})
}

// all reads events until it has seen each of keys, in any order: "HOST up"
// for a host announced up, "HOST/PLAN" for a plan awaiting approval on HOST
// (hosts' events interleave in any order).
func (w *fleetWatch) all(keys ...string) {
	w.t.Helper()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	w.until(fmt.Sprint(keys), func(ev sseEvent, d map[string]any) bool {
		switch {
		case ev.Event == "host" && str(d, "state") == "up":
			delete(want, str(d, "name")+" up")
		case ev.Event == "EVENT_KIND_AWAITING_APPROVAL":
			delete(want, str(d, "host")+"/"+str(d, "plan", "id"))
		}
		return len(want) == 0
	})
}

// The merged stream: a host killed mid-stream is reported down while the
// other's events keep coming; restarted on the same state and socket, it is
// followed from the first event of its new run; a browser that reconnects
// with Last-Event-ID — here to a second gateway of the same fleet, which
// shares nothing with the first — resumes every host from its own seq.
func TestFleetEventsResume(t *testing.T) {
	e := newEnv(t, envOpts{fleet: []string{"a", "b"}})
	w := &fleetWatch{t: t, s: e.openSSE("/v1/fleet/events", e.Operator), last: map[string]fleetPos{}, count: map[string]int{}}
	w.all("a up", "b up")
	for _, h := range []string{"a", "b", "a", "b"} {
		id, _ := e.planOn(h, "x")
		w.all(h + "/" + id)
	}
	epochB := w.last["b"].epoch

	e.hosts["b"].Kill9()
	down := w.hostState("b", "down")
	if str(down, "error") == "" {
		t.Errorf("b down without its error: %v", down)
	}
	for i := 0; i < 3; i++ { // a is served while b is down
		id, _ := e.planOn("a", "y")
		w.all("a/" + id)
	}
	if code, _ := status(t, e.do("POST", "/v1/hosts/b/plans", e.Operator, map[string]any{"request": map[string]any{"argv": []string{"true"}}})); code != 503 {
		t.Errorf("a plan on b while it is down: %d, want 503", code)
	}

	e.hosts["b"].Restart()
	up := w.hostState("b", "up")
	if dig(up, "restarted") != true || w.last["b"].epoch == epochB || w.last["b"].seq != 0 {
		t.Fatalf("b after its restart: %v, position %v (was run %s)", up, w.last["b"], epochB)
	}
	id, _ := e.planOn("b", "z")
	w.all("b/" + id)

	// The browser goes away; both hosts go on; it comes back to another
	// gateway with the id it last saw.
	w.s.res.Body.Close()
	var want []string
	for _, h := range []string{"a", "b", "b", "a"} {
		id, _ := e.planOn(h, "w")
		want = append(want, h+"/"+id)
	}
	other := newGatewayFor(t, e)
	w.s = other.openSSE("/v1/fleet/events", e.Operator, "Last-Event-ID", w.lastID)
	w.all(want...)
	if w.count["a"] == 0 || w.count["b"] == 0 {
		t.Errorf("events per host: %v", w.count)
	}
}

// Bad fleet settings are refused at start, each naming what is wrong.
func TestBinaryRefusesBadFleets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	typo := write("typo.yaml", "hosts:\n  - name: a\n    adress: /run/a.sock\n")
	empty := write("empty.yaml", "tls: {}\n")
	dupFile := write("dup.yaml", "hosts:\n  - {name: a, address: /run/a.sock}\n")
	badDefault := write("default.yaml", "default_host: zz\nhosts:\n  - {name: a, address: /run/a.sock}\n")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"duplicate names", []string{"--daemon", "a=/run/a.sock", "--daemon", "a=/run/b.sock"}, `host name "a" is given twice`},
		{"duplicate across flag and file", []string{"--daemon", "a=/run/x.sock", "--fleet", dupFile}, `host name "a" is given twice`},
		{"bad name", []string{"--daemon", "Build_1=/run/a.sock"}, `host name "Build_1": use 1 to 63 lowercase letters`},
		{"no target", []string{"--daemon", "a"}, "write NAME=TARGET"},
		{"bad target", []string{"--daemon", "a=somewhere"}, "neither a unix socket path"},
		{"unknown key", []string{"--fleet", typo}, "field adress not found"},
		{"no hosts", []string{"--fleet", empty}, "lists no hosts"},
		{"unknown default", []string{"--fleet", badDefault}, `default host "zz" is not one of the hosts (a)`},
		{"socket with daemons", []string{"--socket", "/run/x.sock", "--daemon", "a=/run/a.sock"}, "--socket and --daemon/--fleet do not go together"},
		{"TCP without a certificate", []string{"--daemon", "a=10.0.0.1:7443"}, "mutual TLS: give the gateway's client certificate"},
		{"client flags without a fleet", []string{"--client-cert", "/x.pem"}, "--client-cert applies to a fleet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := runGateway(t, append([]string{"--listen", "127.0.0.1:0", "--token-file", filepath.Join(dir, "gw.token")}, c.args...)...)
			if code == 0 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, output %q; want a refusal mentioning %q", code, out, c.want)
			}
		})
	}
}

// A host reached over termd's mutual-TLS listener beside one on its unix
// socket: the gateway dials it with its client certificate; the person a
// token names is recorded with the gateway's certificate in b's approval
// and receipt; a host whose certificate the gateway cannot verify is down
// with the handshake's error while the others are served.
func TestFleetOverMutualTLS(t *testing.T) {
	ca := testpki.MustCA("fleet CA")
	dir := t.TempDir()
	srv, err := ca.Server("termd", []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	sf, err := srv.WriteAll(dir, "server", ca)
	if err != nil {
		t.Fatal(err)
	}
	gwc, err := ca.Client("gateway-1", "spiffe://fleet/gateway")
	if err != nil {
		t.Fatal(err)
	}
	gf, err := gwc.WriteAll(dir, "gateway", ca)
	if err != nil {
		t.Fatal(err)
	}
	// A CA the gateway does not trust signed c's server certificate.
	other := testpki.MustCA("other CA")
	osrv, err := other.Server("termd", []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	of, err := osrv.WriteAll(dir, "other", ca)
	if err != nil {
		t.Fatal(err)
	}
	listen := func(f testpki.Files) (string, string) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr, fmt.Sprintf("listen_tls:\n  address: %q\n  cert_file: %q\n  key_file: %q\n  client_ca_file: %q\n  clients:\n"+
			"    - {name: gw-1, uri: \"spiffe://fleet/gateway\", role: operator, run_as: root, gateway: true}\n", addr, f.Cert, f.Key, f.CA)
	}
	a := harness.Start(t, harness.Options{AskWrites: true})
	bAddr, bCfg := listen(sf)
	b := harness.Start(t, harness.Options{AskWrites: true, Config: bCfg})
	cAddr, cCfg := listen(of)
	harness.Start(t, harness.Options{AskWrites: true, Config: cCfg})
	tlsFiles := gateway.HostTLS{Cert: gf.Cert, Key: gf.Key, CA: gf.CA}
	e := newEnv(t, envOpts{tune: func(o *gateway.Options) {
		o.Hosts = []gateway.Host{{Name: "a", Target: a.Socket}, {Name: "b", Target: bAddr, TLS: tlsFiles}, {Name: "c", Target: "tls://" + cAddr, TLS: tlsFiles}}
	}})
	e.hosts = map[string]*harness.Daemon{"a": a, "b": b}

	hs := e.hostsByName()
	if str(hs["a"], "state") != "up" || str(hs["a"], "transport") != "unix" || str(hs["b"], "state") != "up" || str(hs["b"], "transport") != "mtls" {
		t.Fatalf("hosts: %v", hs)
	}
	if str(hs["c"], "state") != "down" || !strings.Contains(str(hs["c"], "error"), "certificate") {
		t.Errorf("c, whose server certificate the gateway's CA did not sign: %v", hs["c"])
	}
	if st := e.call("GET", "/v1/hosts/b/status", nil); str(st, "caller", "name") != "token:alice" || str(st, "caller", "role") != "ROLE_OPERATOR" {
		t.Errorf("the caller on b: %v", st["caller"])
	}

	id, hash := e.planOn("b", "over-tls.txt")
	q := e.call("GET", "/v1/fleet/plans", nil)
	if ps := q["plans"].([]any); len(ps) != 1 || str(ps[0], "id") != id || str(ps[0], "host") != "b" {
		t.Errorf("queue: %v", q)
	}
	if code, _ := status(t, e.do("POST", "/v1/hosts/b/plans/"+id+":approve", e.Viewer, map[string]any{"request_hash": hash})); code != 403 {
		t.Errorf("viewer token approving over TLS: %d, want 403 (the token's role lowers the certificate's)", code)
	}
	p := e.call("POST", "/v1/hosts/b/plans/"+id+":approve", map[string]any{"request_hash": hash})["plan"]
	if str(p, "state") != "PLAN_STATE_APPROVED" {
		t.Fatalf("approve on b: %v", p)
	}
	rid := str(e.runOn("b", id), "receipt_id")
	if _, err := os.Stat(filepath.Join(b.Workspace, "over-tls.txt")); err != nil {
		t.Errorf("b's file: %v", err)
	}
	rj := str(e.call("GET", "/v1/hosts/b/receipts/"+rid, nil), "receipt_json")
	var rc struct {
		Approver struct{ Kind, Name, Gateway string }
	}
	if err := json.Unmarshal([]byte(rj), &rc); err != nil || rc.Approver.Kind != "cert" || !strings.HasPrefix(rc.Approver.Name, "token:alice") || rc.Approver.Gateway != "gw-1" {
		t.Errorf("b's receipt: approver %+v (%v), want the person token:alice through gateway gw-1", rc.Approver, err)
	}
}
