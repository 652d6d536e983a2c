package e2e

import (
	"io"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/adviser/fakeapi"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

const fakeKey = "sk-termd-test-adviser-key-0123456789"

func startWithAdviser(t *testing.T) (*harness.Daemon, *fakeapi.Server) {
	api := fakeapi.New(t)
	t.Cleanup(api.Close)
	d := harness.Start(t, harness.Options{
		AskWrites: true, // touch stands for a command that needs approval
		Config:    "adviser:\n  base_url: " + api.URL + "\n  api_key_env: TERMD_TEST_ADVISER_KEY\n  idle_timeout: 2s\n  max_attempts: 2\n",
		Env:       []string{"TERMD_TEST_ADVISER_KEY=" + fakeKey},
	})
	return d, api
}

func advise(t *testing.T, d *harness.Daemon, r *termdv1.AdviseRequest) (text string, res *termdv1.AdviceResult, err error) {
	t.Helper()
	st, err := d.Client.Adviser.Advise(ctxT(t), r)
	if err != nil {
		return "", nil, err
	}
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return text, res, nil
		}
		if err != nil {
			return text, res, err
		}
		text += m.GetTextDelta()
		if m.GetResult() != nil {
			res = m.GetResult()
		}
	}
}

func TestAdviceIsDataAndPolicyStillDecides(t *testing.T) {
	d, api := startWithAdviser(t)
	s, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	text, res, err := advise(t, d, &termdv1.AdviseRequest{SessionId: s.Session.Id, Intent: termdv1.AdviseIntent_ADVISE_INTENT_SUGGEST, Question: "free some disk space FAKE:danger"})
	if err != nil || res == nil || text == "" {
		t.Fatalf("advice: %q %v %v", text, res, err)
	}
	var dangerous []string
	for _, sg := range res.Suggestions {
		if len(sg.Argv) > 0 && sg.Argv[0] == "rm" {
			dangerous = sg.Argv
		}
	}
	if dangerous == nil {
		t.Fatalf("the fake proposed rm -rf /; suggestions %v", res.Suggestions)
	}
	// Nothing ran: no plan, no execution, no receipt came from the advice.
	ps, _ := d.Client.Plans.ListPlans(ctxT(t), &termdv1.ListPlansRequest{})
	rs, _ := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{})
	if len(ps.Plans) != 0 || len(rs.Receipts) != 0 {
		t.Fatalf("advice created %d plans and %d receipts", len(ps.Plans), len(rs.Receipts))
	}
	// Planned by a client, the suggestion is decided like any other request.
	p := plan(t, d.Client, s.Session.Id, dangerous...)
	if p.State != termdv1.PlanState_PLAN_STATE_BLOCKED {
		t.Fatalf("planning the dangerous suggestion: %v %v", p.State, p.Decision.Reasons)
	}
	// The key reaches the API only in the Authorization header, and never the log, responses or receipts.
	for _, r := range api.Requests() {
		if strings.Contains(string(r.Body), fakeKey) {
			t.Fatal("the API key was sent in a request body")
		}
		if r.Header.Get("Authorization") != "Bearer "+fakeKey {
			t.Fatalf("authorization header %q", r.Header.Get("Authorization"))
		}
	}
	if strings.Contains(d.Log(), fakeKey) || strings.Contains(text, fakeKey) {
		t.Fatal("the API key leaked into the log or the advice")
	}
	all, _ := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{})
	if len(all.Receipts) == 0 {
		t.Fatal("the blocked plan should have a receipt")
	}
	for _, r := range all.Receipts {
		got, err := d.Client.Receipts.GetReceipt(ctxT(t), &termdv1.GetReceiptRequest{ReceiptId: r.Id})
		if err != nil || strings.Contains(got.ReceiptJson, fakeKey) {
			t.Fatalf("receipt %s: %v (or the key is in it)", r.Id, err)
		}
	}
}

func TestAdviserFlagRaisesScrutinyEvenInTrustedMode(t *testing.T) {
	d, _ := startWithAdviser(t)
	p := trustedPlan(t, d.Client, "", 30, "ls", "-la")
	_, res, err := advise(t, d, &termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_EXPLAIN, PlanId: p.Id, Question: "FAKE:verdict-danger"})
	if err != nil || res == nil || !res.Flagged {
		t.Fatalf("explain with a dangerous verdict: %v %v", res, err)
	}
	g, _ := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: p.Id})
	if g.Plan.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || !g.Plan.FlaggedByAdviser || g.Plan.AdviceDigest != res.Digest {
		t.Fatalf("a flagged plan must need approval even in trusted mode: %v flagged=%v digest=%q", g.Plan.State, g.Plan.FlaggedByAdviser, g.Plan.AdviceDigest)
	}
	ap, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: g.Plan.Decision.RequestHash})
	if err != nil {
		t.Fatal(err)
	}
	_, rec, _, _ := runToEnd(t, d.Client, ap.Plan)
	if r := receiptJSON(t, d.Client, rec.Id); r["advice_digest"] != res.Digest {
		t.Fatalf("the receipt should record the advice digest %q; got %v", res.Digest, r["advice_digest"])
	}
	// A "safe" verdict never lowers scrutiny.
	p2 := plan(t, d.Client, "", "touch", "x")
	advise(t, d, &termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_EXPLAIN, PlanId: p2.Id, Question: "FAKE:verdict-safe"})
	g2, _ := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: p2.Id})
	if g2.Plan.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		t.Fatalf("a safe verdict lowered scrutiny: %v", g2.Plan.State)
	}
}

func TestAdviserUnavailableWithoutKey(t *testing.T) {
	d := harness.Start(t, harness.Options{Env: []string{"DEEPSEEK_API_KEY="}})
	_, _, err := advise(t, d, &termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_ASK, Question: "hello"})
	if err == nil || !strings.Contains(err.Error(), "DEEPSEEK_API_KEY") || strings.Contains(err.Error(), "not reachable") {
		t.Fatalf("want a clear 'unavailable: set DEEPSEEK_API_KEY' error; got %v", err)
	}
	// Everything else works.
	if ex, _, _, _ := runToEnd(t, d.Client, plan(t, d.Client, "", "true")); ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		t.Fatalf("without an adviser, commands still run: %v", ex.State)
	}
}
