package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/egress"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// privateName is a host name the system resolver maps to an address that is
// not public (Debian and most images map the host's own name to 127.0.1.1
// or 127.0.0.1 in /etc/hosts): the proxy must refuse it although it is
// listed, since no one named that address.
func privateName(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err == nil && h != "localhost" {
		if addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", h); err == nil && len(addrs) > 0 && !egress.Public(addrs[0]) {
			return h
		}
	}
	harness.Missing(t, "this host's name (%q) does not resolve to a private address through /etc/hosts", h)
	return ""
}

// egressRun plans req in a new session, approves it when asked (as the
// operator, when approve is true), runs it to its end and returns its
// plan, execution, output, the refusals published live, and its receipt.
func egressRun(t *testing.T, d *harness.Daemon, req *termdv1.CommandRequest, approve bool) (*termdv1.Plan, *termdv1.Execution, string, []*termdv1.EgressRefusal, map[string]any) {
	t.Helper()
	req.Cwd = d.Workspace
	resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: req})
	if err != nil {
		t.Fatalf("plan %q: %v", req.Argv, err)
	}
	p := resp.Plan
	switch {
	case p.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL && approve:
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	case p.State != termdv1.PlanState_PLAN_STATE_PLANNED:
		t.Fatalf("plan %q: %v %v", req.Argv, p.State, p.Decision.Reasons)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := d.Client.Executions.ExecuteAndWait(ctx, &termdv1.ExecuteAndWaitRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	var ex *termdv1.Execution
	var out string
	var refused []*termdv1.EgressRefusal
	var rid string
	for {
		m, err := st.Recv()
		if err != nil {
			break
		}
		switch ev := m.Event; ev.Kind {
		case termdv1.EventKind_EVENT_KIND_OUTPUT:
			out += string(ev.GetOutput().Data)
		case termdv1.EventKind_EVENT_KIND_FINISHED:
			ex = ev.GetExecution()
		case termdv1.EventKind_EVENT_KIND_EGRESS_REFUSED:
			refused = append(refused, ev.GetEgressRefused())
		case termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED:
			rid = ev.GetReceipt().Id
		}
	}
	if rid == "" || ex == nil {
		t.Fatalf("%q: the stream ended before the receipt\n%s", req.Argv, out)
	}
	return p, ex, out, refused, receiptJSON(t, d.Client, rid)
}

func egressOf(t *testing.T, rc map[string]any) (dests, refused []map[string]any) {
	t.Helper()
	eg, ok := rc["egress"].(map[string]any)
	if !ok {
		t.Fatalf("the receipt has no egress member: %v", rc)
	}
	for _, x := range eg["destinations"].([]any) {
		dests = append(dests, x.(map[string]any))
	}
	for _, x := range eg["refused"].([]any) {
		refused = append(refused, x.(map[string]any))
	}
	return dests, refused
}

// npm install from a local registry reached by name through the registries
// allow-list runs without approval in confirm mode, and its receipt names
// the registry with its byte counts; unlisted hosts and a listed name that
// resolves to a private address are refused, live and in the receipt; with
// network none nothing can be reached.
func TestEgressPackageFetchAndRefusals(t *testing.T) {
	requireSandbox(t)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("this test runs npm (scripts/ci-deps.sh installs it): %v", err)
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("this test runs curl: %v", err)
	}
	reg := startNPMRegistry(t, "registry.test")
	private := privateName(t)
	d := harness.Start(t, harness.Options{Config: fmt.Sprintf(`egress:
  allow_lists:
    registries: ["registry.test:%s"]
    probe: ["registry.test:%s", "%s:*"]
  hosts:
    registry.test: 127.0.0.1
`, reg.Port, reg.Port, private)})
	for name, body := range map[string]string{
		"package.json": `{"name":"app","version":"1.0.0","dependencies":{"leftpad-mini":"1.0.0"}}`,
		".npmrc":       "registry=http://registry.test:" + reg.Port + "/\naudit=false\nfund=false\n",
	} {
		if err := os.WriteFile(filepath.Join(d.Workspace, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// 1. npm install: no approval, egress:registries, the registry in the receipt.
	p, ex, out, refused, rc := egressRun(t, d, &termdv1.CommandRequest{Argv: []string{npm, "install"}}, false)
	if p.Decision.Sandbox.GetNetworkMode() != "egress:registries" {
		t.Fatalf("npm install got network %q, want egress:registries (%v)", p.Decision.Sandbox.GetNetworkMode(), p.Decision.Reasons)
	}
	if ex.ExitCode != 0 || len(refused) != 0 {
		t.Fatalf("npm install: exit %d, refused %v\n%s\nregistry saw: %s", ex.ExitCode, refused, out, reg.Requests())
	}
	if _, err := os.Stat(filepath.Join(d.Workspace, "node_modules", "leftpad-mini", "index.js")); err != nil {
		t.Fatalf("the package was not installed: %v\n%s", err, out)
	}
	if !strings.Contains(reg.Requests(), "GET /leftpad-mini/-/leftpad-mini-1.0.0.tgz") {
		t.Fatalf("the registry did not serve the tarball: %s", reg.Requests())
	}
	dests, refusedRC := egressOf(t, rc)
	if len(dests) != 1 || dests[0]["host"] != "registry.test" || fmt.Sprint(dests[0]["port"]) != reg.Port ||
		dests[0]["bytes_down"].(float64) < 300 || dests[0]["bytes_up"].(float64) < 100 || len(refusedRC) != 0 {
		t.Fatalf("receipt egress: %v refused %v", dests, refusedRC)
	}
	if rc["approved"] == true || rc["schema_version"] != "1.7" || rc["sandbox"].(map[string]any)["network_mode"] != "egress:registries" {
		t.Fatalf("receipt: approved %v, schema %v, sandbox %v", rc["approved"], rc["schema_version"], rc["sandbox"])
	}

	// 2. curl with egress:probe (asked: curl is not a package fetch): an
	// unlisted name, a listed name resolving to a private address, an IP.
	for _, c := range []struct{ url, host, reason string }{
		{"http://unlisted.test:" + reg.Port + "/leftpad-mini", "unlisted.test", egress.ReasonNotListed},
		{"http://" + private + ":" + reg.Port + "/leftpad-mini", strings.ToLower(private), egress.ReasonPrivateAddress},
		{"http://10.0.0.1:" + reg.Port + "/", "10.0.0.1", egress.ReasonIPLiteral},
	} {
		p, ex, out, refused, rc := egressRun(t, d, &termdv1.CommandRequest{Argv: []string{curl, "-sS", "--fail", c.url}, Network: "egress:probe"}, true)
		if p.Decision.Verdict != termdv1.Verdict_VERDICT_ASK {
			t.Errorf("curl with egress:probe: %s, want ask", p.Decision.Verdict)
		}
		if ex.ExitCode == 0 {
			t.Errorf("curl %s succeeded through the proxy:\n%s", c.url, out)
		}
		if len(refused) != 1 || refused[0].Host != c.host || refused[0].Reason != c.reason || refused[0].AllowList != "probe" {
			t.Errorf("curl %s: live refusals %v, want one %s for %s\nexit %d error %q\n%s", c.url, refused, c.reason, c.host, ex.ExitCode, ex.Error, out)
		}
		dests, rr := egressOf(t, rc)
		if len(dests) != 0 || len(rr) != 1 || rr[0]["host"] != c.host || rr[0]["reason"] != c.reason || rr[0]["count"] != float64(1) {
			t.Errorf("curl %s: receipt destinations %v refused %v", c.url, dests, rr)
		}
	}
	// The same name through the same list does reach the registry.
	if _, ex, out, _, rc := egressRun(t, d, &termdv1.CommandRequest{Argv: []string{curl, "-sS", "--fail", "http://registry.test:" + reg.Port + "/leftpad-mini"}, Network: "egress:probe"}, true); ex.ExitCode != 0 || !strings.Contains(out, `"leftpad-mini"`) {
		t.Errorf("curl to the listed registry: exit %d\n%s", ex.ExitCode, out)
	} else if dests, _ := egressOf(t, rc); len(dests) != 1 || dests[0]["bytes_down"].(float64) < 100 {
		t.Errorf("curl to the listed registry: receipt destinations %v", dests)
	}

	// 3. network none: nothing answers, not even the registry by address.
	before := reg.Requests()
	_, ex, out, _, rc = egressRun(t, d, &termdv1.CommandRequest{Argv: []string{curl, "-sS", "--max-time", "5", "http://" + reg.Addr + "/leftpad-mini"}, Network: "none"}, true)
	if ex.ExitCode == 0 || reg.Requests() != before {
		t.Fatalf("curl with network none reached the registry: exit %d\n%s", ex.ExitCode, out)
	}
	if _, ok := rc["egress"]; ok {
		t.Errorf("a network none receipt has an egress member: %v", rc["egress"])
	}
}
