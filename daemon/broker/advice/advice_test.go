package advice

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/adviser"
	"github.com/termd/termd/daemon/adviser/fakeapi"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/receiptstore"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

const secret = "hunter2-s3cr3t-token"

var agent = &termdv1.Principal{Uid: 1000, Gid: 1000, Name: "agent", Role: termdv1.Role_ROLE_AGENT}

// host is the broker's side for these tests: plans and receipts the caller
// may see, the sessions it may use, and the flags recorded.
type host struct {
	plans    map[string]Plan
	receipts map[string]*receipt.Receipt
	sessions map[string]bool // "" is always allowed
	checked  []string        // sessions checked, in order
	flags    []string        // "plan digest flagged" per FlagPlan
}

func (h *host) Plan(_ *termdv1.Principal, id string) (Plan, error) {
	p, ok := h.plans[id]
	if !ok {
		return Plan{}, errdefs.NotFound("plan %s not found", id)
	}
	return p, nil
}

func (h *host) Receipt(_ context.Context, _ *termdv1.Principal, id string) (*receipt.Receipt, error) {
	rc, ok := h.receipts[id]
	if !ok {
		return nil, errdefs.NotFound("receipt %s not found", id)
	}
	return rc, nil
}

func (h *host) CheckSession(_ *termdv1.Principal, id string) error {
	h.checked = append(h.checked, id)
	if id != "" && !h.sessions[id] {
		return errdefs.NotFound("session %s not found", id)
	}
	return nil
}

func (h *host) FlagPlan(_ *termdv1.Principal, id, digest string, flagged bool) error {
	if digest == "" {
		return errdefs.Invalid("no digest")
	}
	h.flags = append(h.flags, id+" "+map[bool]string{true: "flagged", false: "clear"}[flagged])
	return nil
}

// fixture is a real adviser talking to the local fake API, and a real
// redactor that knows one secret. The adviser is given no redactor of its
// own, so what these tests see redacted, Advice redacted.
type fixture struct {
	a    *Advice
	srv  *fakeapi.Server
	host *host
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	t.Setenv("DEEPSEEK_API_KEY", "sk-test-key-for-advice")
	f := &fixture{srv: fakeapi.New(t), host: &host{plans: map[string]Plan{}, receipts: map[string]*receipt.Receipt{}, sessions: map[string]bool{"s1": true}}}
	red := receiptstore.NewRedactor(secret)
	adv := adviser.New(adviser.Config{Enabled: true, BaseURL: f.srv.URL, Timeout: 20 * time.Second, IdleTimeout: 5 * time.Second, MaxAttempts: 1, History: 10},
		nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.a = New(adv, red, f.host)
	return f
}

// ask runs Advise and returns what was streamed: text deltas, reasoning
// deltas and the final result.
func (f *fixture) ask(t *testing.T, r *termdv1.AdviseRequest) (text, reasoning string, res *termdv1.AdviceResult, err error) {
	t.Helper()
	err = f.a.Advise(context.Background(), agent, r, func(m *termdv1.AdviseResponse) error {
		switch c := m.Chunk.(type) {
		case *termdv1.AdviseResponse_TextDelta:
			text += c.TextDelta
		case *termdv1.AdviseResponse_ReasoningDelta:
			reasoning += c.ReasoningDelta
		case *termdv1.AdviseResponse_Result:
			res = c.Result
		}
		return nil
	})
	return
}

func (f *fixture) lastUser(t *testing.T) string {
	t.Helper()
	reqs := f.srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("nothing was sent to the API")
	}
	msgs := reqs[len(reqs)-1].Messages
	return msgs[len(msgs)-1].Content
}

func TestExplainShowsThePlanAndRecordsTheFlag(t *testing.T) {
	f := newFixture(t)
	f.host.plans["p1"] = Plan{ID: "p1", State: "planned", SessionID: "s1", Preview: "removes 3 files",
		Decision: &termdv1.Decision{Argv: []string{"rm", "-rf", "build"}, ResolvedPath: "/usr/bin/rm", Cwd: "/w",
			Verdict: termdv1.Verdict_VERDICT_ASK, Risk: termdv1.Risk_RISK_HIGH, Reasons: []string{"recursive delete", "token " + secret}, Rules: []string{"rm.recursive"}}}
	f.srv.Enqueue(fakeapi.Verdict(true))
	text, _, res, err := f.ask(t, &termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_EXPLAIN, PlanId: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	sent := f.lastUser(t)
	for _, want := range []string{"Plan p1 (state planned)", `argv: ["rm" "-rf" "build"]`, "program: /usr/bin/rm", "decision: ask, risk high", "reasons: recursive delete; token", "rules: rm.recursive", "preview: removes 3 files"} {
		if !strings.Contains(sent, want) {
			t.Fatalf("the model should be shown %q:\n%s", want, sent)
		}
	}
	if strings.Contains(string(f.srv.Requests()[0].Body), secret) {
		t.Fatalf("a secret reached the API:\n%s", sent)
	}
	if !strings.Contains(text, "This plan runs the command") || res == nil || !res.Flagged || res.Digest == "" {
		t.Fatalf("the answer streams and the result says flagged: %q %+v", text, res)
	}
	if strings.Join(f.host.flags, ",") != "p1 flagged" || strings.Join(f.host.checked, ",") != "s1" {
		t.Fatalf("explain checks the plan's session and records the flag: flags %q sessions %q", f.host.flags, f.host.checked)
	}
	// The answer is redacted too, as it streams and in the result.
	f.srv.Enqueue(fakeapi.Answer("the key is ", secret))
	text, _, res, err = f.ask(t, &termdv1.AdviseRequest{Question: "what is the key?", SessionId: "s1"})
	if err != nil || strings.Contains(text, secret) || strings.Contains(res.Text, secret) || !strings.Contains(res.Text, "the key is") {
		t.Fatalf("a secret in the answer must be redacted: %q %q %v", text, res.GetText(), err)
	}
	// Asking is not explaining: nothing is flagged.
	f.srv.Enqueue(fakeapi.Verdict(true))
	if _, _, _, err := f.ask(t, &termdv1.AdviseRequest{Question: "is rm safe?", SessionId: "s1"}); err != nil {
		t.Fatal(err)
	}
	if len(f.host.flags) != 1 {
		t.Fatalf("only explain flags a plan: %q", f.host.flags)
	}
}

func TestDiagnoseSendsTheReceiptsTail(t *testing.T) {
	f := newFixture(t)
	code := 2
	f.host.receipts["r1"] = &receipt.Receipt{ID: "r1", SessionID: "s1", Command: "make test", Cwd: "/w", Status: receipt.StatusFailed, ExitCode: &code,
		Decision: "allow", Detail: "exit 2", Stderr: "HEAD" + strings.Repeat("e", 5000) + "STDERR-END", Stdout: "ok " + secret}
	f.srv.Enqueue(fakeapi.Answer("the tests failed"))
	_, _, res, err := f.ask(t, &termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_DIAGNOSE, ReceiptId: "r1"})
	if err != nil || res.Text != "the tests failed" {
		t.Fatalf("diagnose: %+v %v", res, err)
	}
	sent := f.lastUser(t)
	for _, want := range []string{"Receipt r1", "command: make test", "status: failed", "exit code: 2", "detail: exit 2", "…" + strings.Repeat("e", 100), "STDERR-END"} {
		if !strings.Contains(sent, want) {
			t.Fatalf("the model should be shown %q:\n%.600s", want, sent)
		}
	}
	if strings.Contains(sent, "HEAD") || strings.Contains(sent, secret) {
		t.Fatalf("only stderr's tail is sent, and no secret")
	}
	if strings.Join(f.host.checked, ",") != "s1" || len(f.host.flags) != 0 {
		t.Fatalf("diagnose uses the receipt's session and flags nothing: %q %q", f.host.checked, f.host.flags)
	}
}

func TestSuggestionsCarryTheirConcernAndReasoningIsOptIn(t *testing.T) {
	f := newFixture(t)
	f.srv.Enqueue(fakeapi.DangerousSuggestion())
	_, _, res, err := f.ask(t, &termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_SUGGEST, Question: "install the tool"})
	if err != nil {
		t.Fatal(err)
	}
	var cautioned bool
	for _, s := range res.Suggestions {
		cautioned = cautioned || strings.Contains(s.Purpose, "(caution: ")
	}
	if !res.Flagged || !cautioned {
		t.Fatalf("a dangerous suggestion is flagged and its purpose carries the concern: %+v", res)
	}
	for _, include := range []bool{false, true} {
		f.srv.Enqueue(fakeapi.Reasoning([]string{"thinking ", "hard"}, "the ", "answer"))
		text, reasoning, _, err := f.ask(t, &termdv1.AdviseRequest{Question: "why?", IncludeReasoning: include})
		if err != nil || text != "the answer" || (reasoning == "thinking hard") != include {
			t.Fatalf("include_reasoning=%v: text %q reasoning %q %v", include, text, reasoning, err)
		}
	}
}

func TestAdviseRefusesWhatItCannotAnswer(t *testing.T) {
	f := newFixture(t)
	for name, c := range map[string]struct {
		r    *termdv1.AdviseRequest
		kind errdefs.Kind
		want string
	}{
		"ask without question":     {&termdv1.AdviseRequest{Question: "  "}, errdefs.KindInvalid, "ask needs a question"},
		"suggest without task":     {&termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_SUGGEST}, errdefs.KindInvalid, "suggest needs a task"},
		"explain without plan":     {&termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_EXPLAIN}, errdefs.KindInvalid, "explain needs a plan_id"},
		"explain unknown plan":     {&termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_EXPLAIN, PlanId: "nope"}, errdefs.KindNotFound, "plan nope"},
		"diagnose without id":      {&termdv1.AdviseRequest{Intent: termdv1.AdviseIntent_ADVISE_INTENT_DIAGNOSE}, errdefs.KindInvalid, "diagnose needs a receipt_id"},
		"unknown intent":           {&termdv1.AdviseRequest{Intent: 99, Question: "q"}, errdefs.KindInvalid, "is not one of ask, explain, suggest, diagnose"},
		"session not the caller's": {&termdv1.AdviseRequest{Question: "q", SessionId: "other"}, errdefs.KindNotFound, "session other"},
	} {
		_, _, _, err := f.ask(t, c.r)
		if errdefs.KindOf(err) != c.kind || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a %v error saying %q", name, err, c.kind, c.want)
		}
	}
	if n := f.srv.Count(); n != 0 {
		t.Fatalf("refused requests never reach the API: %d sent", n)
	}
	f.srv.Enqueue(fakeapi.Unauthorized())
	if _, _, _, err := f.ask(t, &termdv1.AdviseRequest{Question: "q"}); errdefs.KindOf(err) != errdefs.KindUnavailable || !strings.Contains(err.Error(), "the adviser's API failed") {
		t.Fatalf("an API error is unavailable, saying the API failed: %v", err)
	}
	off := New(nil, receiptstore.NewRedactor(), f.host)
	if err := off.Advise(context.Background(), agent, &termdv1.AdviseRequest{Question: "q"}, nil); errdefs.KindOf(err) != errdefs.KindUnavailable || !strings.Contains(err.Error(), "adviser.enabled") {
		t.Fatalf("a turned-off adviser says which setting: %v", err)
	}
	off.Forget("s1") // no adviser: nothing to forget, and no panic
	t.Setenv("DEEPSEEK_API_KEY", "")
	if _, _, _, err := f.ask(t, &termdv1.AdviseRequest{Question: "q"}); errdefs.KindOf(err) != errdefs.KindUnavailable {
		t.Fatalf("without a key the adviser is unavailable: %v", err)
	}
}

func TestForgetDropsTheSessionsConversation(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{"first question", "second question"} {
		f.srv.Enqueue(fakeapi.Answer("answer"))
		if _, _, _, err := f.ask(t, &termdv1.AdviseRequest{Question: q, SessionId: "s1"}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.srv.Requests()
	if !strings.Contains(string(reqs[1].Body), "first question") {
		t.Fatalf("within a session the conversation is remembered")
	}
	f.a.Forget("s1")
	f.srv.Enqueue(fakeapi.Answer("answer"))
	if _, _, _, err := f.ask(t, &termdv1.AdviseRequest{Question: "third question", SessionId: "s1"}); err != nil {
		t.Fatal(err)
	}
	if body := string(f.srv.Requests()[2].Body); strings.Contains(body, "first question") || strings.Contains(body, "second question") {
		t.Fatalf("after Forget the session starts over:\n%s", body)
	}
}
