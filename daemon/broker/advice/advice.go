// Package advice owns the adviser glue: it turns an AdviseRequest (ask,
// suggest, explain a plan, diagnose a receipt) into a request to the model
// adviser, streams the redacted answer back and records an explained plan's
// verdict. Advice is data: the only effect it can have on a plan is to raise
// scrutiny (a flagged plan needs approval in every mode).
//
// The broker holds one Advice. What advice needs of the broker (a plan the
// caller may see, a receipt, the session check, flagging a plan) comes
// through Host.
//
// It may import daemon/adviser, daemon/errdefs, the receipt and proto
// packages and lower packages, never daemon/broker nor another of the
// broker's noun packages.
package advice

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/termd/termd/daemon/adviser"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Adviser is the optional model adviser (daemon/adviser.Adviser).
type Adviser interface {
	Available() (bool, string)
	Advise(ctx context.Context, req adviser.Request, onChunk func(adviser.Chunk) error) (adviser.Result, error)
	ForgetSession(id string)
}

// Redactor removes secrets from what goes to the model and comes back.
type Redactor interface {
	Redact(string) string
	RedactAll([]string) []string
}

// Plan is what explaining a plan needs of it.
type Plan struct {
	ID, State, SessionID string
	Decision             *termdv1.Decision
	Preview              string // the preview's summary
}

// Host is what advice needs of the broker.
type Host interface {
	// Plan returns a plan the caller may see, or an error saying why not.
	Plan(caller *termdv1.Principal, id string) (Plan, error)
	// Receipt returns a receipt the caller may see.
	Receipt(ctx context.Context, caller *termdv1.Principal, id string) (*receipt.Receipt, error)
	// CheckSession says whether the caller may see a session ("" = none named).
	CheckSession(caller *termdv1.Principal, sessionID string) error
	// FlagPlan records that advice was shown for a plan; flagged raises its scrutiny.
	FlagPlan(caller *termdv1.Principal, id, digest string, flagged bool) error
}

// Advice asks the adviser on behalf of callers.
type Advice struct {
	adviser Adviser // nil when turned off
	red     Redactor
	host    Host
}

// New returns the advice glue; a nil adviser means it is turned off.
func New(a Adviser, red Redactor, h Host) *Advice {
	return &Advice{adviser: a, red: red, host: h}
}

// asked is an AdviseRequest made ready for the adviser.
type asked struct {
	intent    adviser.Intent
	question  string
	context   string
	sessionID string
}

// Advise asks the adviser and streams its answer through send.
func (a *Advice) Advise(ctx context.Context, caller *termdv1.Principal, r *termdv1.AdviseRequest, send func(*termdv1.AdviseResponse) error) error {
	if a.adviser == nil {
		return errdefs.Unavailable("the adviser is turned off in termd's config (adviser.enabled)")
	}
	if ok, why := a.adviser.Available(); !ok {
		return errdefs.Unavailable("adviser %s", why)
	}
	q, err := a.prepare(ctx, caller, r)
	if err != nil {
		return err
	}
	if err := a.host.CheckSession(caller, q.sessionID); err != nil {
		return err
	}
	res, err := a.adviser.Advise(ctx, adviser.Request{
		SessionID:        q.sessionID,
		Intent:           q.intent,
		Question:         a.red.Redact(q.question),
		Context:          a.red.Redact(q.context),
		IncludeReasoning: r.IncludeReasoning,
	}, func(c adviser.Chunk) error {
		if c.Text != "" {
			if err := send(&termdv1.AdviseResponse{Chunk: &termdv1.AdviseResponse_TextDelta{TextDelta: a.red.Redact(c.Text)}}); err != nil {
				return err
			}
		}
		if c.Reasoning != "" && r.IncludeReasoning {
			return send(&termdv1.AdviseResponse{Chunk: &termdv1.AdviseResponse_ReasoningDelta{ReasoningDelta: a.red.Redact(c.Reasoning)}})
		}
		return nil
	})
	if err != nil && res.Text == "" {
		return adviserError(err)
	}
	if q.intent == adviser.IntentExplain {
		// Record that advice was shown; a flag raises scrutiny, never lowers it.
		if ferr := a.host.FlagPlan(caller, r.PlanId, res.Digest, res.Flagged); ferr != nil {
			return ferr
		}
	}
	out := &termdv1.AdviceResult{Text: a.red.Redact(res.Text), Flagged: res.Flagged, Digest: res.Digest, Model: res.Model, Warnings: res.Warnings}
	if err != nil {
		out.Warnings = append(out.Warnings, "the answer was cut short: "+err.Error())
	}
	for _, s := range res.Suggestions {
		purpose := s.Purpose
		if s.Concern != "" {
			purpose += " (caution: " + s.Concern + ")"
		}
		out.Suggestions = append(out.Suggestions, &termdv1.Suggestion{Argv: a.red.RedactAll(s.Argv), Purpose: a.red.Redact(purpose)})
	}
	return send(&termdv1.AdviseResponse{Chunk: &termdv1.AdviseResponse_Result{Result: out}})
}

// prepare checks the request for its intent and gathers the context the
// model is shown (a plan to explain, a receipt to diagnose).
func (a *Advice) prepare(ctx context.Context, caller *termdv1.Principal, r *termdv1.AdviseRequest) (asked, error) {
	q := asked{intent: adviser.IntentAsk, question: strings.TrimSpace(r.Question), sessionID: r.SessionId}
	switch r.Intent {
	case termdv1.AdviseIntent_ADVISE_INTENT_ASK, termdv1.AdviseIntent_ADVISE_INTENT_UNSPECIFIED:
		if q.question == "" {
			return q, errdefs.Invalid("ask needs a question")
		}
	case termdv1.AdviseIntent_ADVISE_INTENT_SUGGEST:
		q.intent = adviser.IntentSuggest
		if q.question == "" {
			return q, errdefs.Invalid("suggest needs a task in question (e.g. \"find the largest files\")")
		}
	case termdv1.AdviseIntent_ADVISE_INTENT_EXPLAIN:
		q.intent = adviser.IntentExplain
		if r.PlanId == "" {
			return q, errdefs.Invalid("explain needs a plan_id")
		}
		p, err := a.host.Plan(caller, r.PlanId)
		if err != nil {
			return q, err
		}
		q.sessionID, q.context = p.SessionID, planContext(p)
	case termdv1.AdviseIntent_ADVISE_INTENT_DIAGNOSE:
		q.intent = adviser.IntentDiagnose
		if r.ReceiptId == "" {
			return q, errdefs.Invalid("diagnose needs a receipt_id")
		}
		rc, err := a.host.Receipt(ctx, caller, r.ReceiptId)
		if err != nil {
			return q, err
		}
		if q.sessionID == "" {
			q.sessionID = rc.SessionID
		}
		q.context = receiptContext(rc)
	default:
		return q, errdefs.Invalid("intent %v is not one of ask, explain, suggest, diagnose", r.Intent)
	}
	return q, nil
}

func planContext(p Plan) string {
	d := p.Decision
	return fmt.Sprintf("Plan %s (state %s)\nargv: %q\nprogram: %s\ncwd: %s\ndecision: %s, risk %s\nreasons: %s\nrules: %s\npreview: %s\n",
		p.ID, p.State, d.Argv, d.ResolvedPath, d.Cwd, strings.ToLower(strings.TrimPrefix(d.Verdict.String(), "VERDICT_")),
		strings.ToLower(strings.TrimPrefix(d.Risk.String(), "RISK_")), strings.Join(d.Reasons, "; "), strings.Join(d.Rules, ", "), p.Preview)
}

func receiptContext(rc *receipt.Receipt) string {
	exit := "none"
	if rc.ExitCode != nil {
		exit = fmt.Sprint(*rc.ExitCode)
	}
	return fmt.Sprintf("Receipt %s\ncommand: %s\ncwd: %s\nstatus: %s\nexit code: %s\nsignal: %s\ndecision: %s (%s)\ndetail: %s\nstderr (tail):\n%s\nstdout (tail):\n%s\n",
		rc.ID, rc.Command, rc.Cwd, rc.Status, exit, rc.Signal, rc.Decision, strings.Join(rc.Policy.Reasons, "; "), rc.Detail, tail(rc.Stderr, 4000), tail(rc.Stdout, 2000))
}

func adviserError(err error) error {
	var api *adviser.APIError
	switch {
	case errors.Is(err, adviser.ErrUnavailable):
		return errdefs.Unavailable("adviser %v", err)
	case errors.As(err, &api):
		return errdefs.Unavailable("the adviser's API failed: %v", err)
	case errors.Is(err, adviser.ErrInvalidRequest):
		return errdefs.Invalid("%v", err)
	case errors.Is(err, context.Canceled):
		return err
	}
	return errdefs.Unavailable("the adviser failed: %v", err)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Forget drops a closed session's conversation.
func (a *Advice) Forget(sessionID string) {
	if a.adviser != nil {
		a.adviser.ForgetSession(sessionID)
	}
}
