package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/termd/termd/daemon/adviser"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Advise asks the adviser. Its answer is data: the only effect it can have on
// a plan is to raise scrutiny (a flagged plan needs approval in every mode).
func (b *Broker) Advise(ctx context.Context, caller *termdv1.Principal, r *termdv1.AdviseRequest, send func(*termdv1.AdviseResponse) error) error {
	if b.Adviser == nil {
		return errdefs.Unavailable("the adviser is turned off in termd's config (adviser.enabled)")
	}
	if ok, why := b.Adviser.Available(); !ok {
		return errdefs.Unavailable("adviser %s", why)
	}
	intent, question := adviser.IntentAsk, strings.TrimSpace(r.Question)
	var context strings.Builder
	sessionID := r.SessionId
	switch r.Intent {
	case termdv1.AdviseIntent_ADVISE_INTENT_ASK, termdv1.AdviseIntent_ADVISE_INTENT_UNSPECIFIED:
		if question == "" {
			return errdefs.Invalid("ask needs a question")
		}
	case termdv1.AdviseIntent_ADVISE_INTENT_SUGGEST:
		intent = adviser.IntentSuggest
		if question == "" {
			return errdefs.Invalid("suggest needs a task in question (e.g. \"find the largest files\")")
		}
	case termdv1.AdviseIntent_ADVISE_INTENT_EXPLAIN:
		intent = adviser.IntentExplain
		if r.PlanId == "" {
			return errdefs.Invalid("explain needs a plan_id")
		}
		b.mu.Lock()
		p, err := b.planLocked(caller, r.PlanId)
		if err == nil {
			sessionID = p.session.id
			d := p.p.Decision
			fmt.Fprintf(&context, "Plan %s (state %s)\nargv: %q\nprogram: %s\ncwd: %s\ndecision: %s, risk %s\nreasons: %s\nrules: %s\npreview: %s\n",
				p.p.Id, stateWord(p.p.State), d.Argv, d.ResolvedPath, d.Cwd, strings.ToLower(strings.TrimPrefix(d.Verdict.String(), "VERDICT_")),
				strings.ToLower(strings.TrimPrefix(d.Risk.String(), "RISK_")), strings.Join(d.Reasons, "; "), strings.Join(d.Rules, ", "), p.p.Preview.GetSummary())
		}
		b.unlock()
		if err != nil {
			return err
		}
	case termdv1.AdviseIntent_ADVISE_INTENT_DIAGNOSE:
		intent = adviser.IntentDiagnose
		if r.ReceiptId == "" {
			return errdefs.Invalid("diagnose needs a receipt_id")
		}
		rc, err := b.GetReceipt(ctx, caller, r.ReceiptId, "")
		if err != nil {
			return err
		}
		if sessionID == "" {
			sessionID = rc.SessionID
		}
		exit := "none"
		if rc.ExitCode != nil {
			exit = fmt.Sprint(*rc.ExitCode)
		}
		fmt.Fprintf(&context, "Receipt %s\ncommand: %s\ncwd: %s\nstatus: %s\nexit code: %s\nsignal: %s\ndecision: %s (%s)\ndetail: %s\nstderr (tail):\n%s\nstdout (tail):\n%s\n",
			rc.ID, rc.Command, rc.Cwd, rc.Status, exit, rc.Signal, rc.Decision, strings.Join(rc.Policy.Reasons, "; "), rc.Detail, tail(rc.Stderr, 4000), tail(rc.Stdout, 2000))
	default:
		return errdefs.Invalid("intent %v is not one of ask, explain, suggest, diagnose", r.Intent)
	}
	if err := b.checkSession(caller, sessionID); err != nil {
		return err
	}
	res, err := b.Adviser.Advise(ctx, adviser.Request{
		SessionID:        sessionID,
		Intent:           intent,
		Question:         b.Redactor.Redact(question),
		Context:          b.Redactor.Redact(context.String()),
		IncludeReasoning: r.IncludeReasoning,
	}, func(c adviser.Chunk) error {
		if c.Text != "" {
			if err := send(&termdv1.AdviseResponse{Chunk: &termdv1.AdviseResponse_TextDelta{TextDelta: b.Redactor.Redact(c.Text)}}); err != nil {
				return err
			}
		}
		if c.Reasoning != "" && r.IncludeReasoning {
			return send(&termdv1.AdviseResponse{Chunk: &termdv1.AdviseResponse_ReasoningDelta{ReasoningDelta: b.Redactor.Redact(c.Reasoning)}})
		}
		return nil
	})
	if err != nil && res.Text == "" {
		return adviserError(err)
	}
	if intent == adviser.IntentExplain {
		// Record that advice was shown; a flag raises scrutiny, never lowers it.
		if ferr := b.FlagPlan(caller, r.PlanId, res.Digest, res.Flagged); ferr != nil {
			return ferr
		}
	}
	out := &termdv1.AdviceResult{Text: b.Redactor.Redact(res.Text), Flagged: res.Flagged, Digest: res.Digest, Model: res.Model, Warnings: res.Warnings}
	if err != nil {
		out.Warnings = append(out.Warnings, "the answer was cut short: "+err.Error())
	}
	for _, s := range res.Suggestions {
		purpose := s.Purpose
		if s.Concern != "" {
			purpose += " (caution: " + s.Concern + ")"
		}
		out.Suggestions = append(out.Suggestions, &termdv1.Suggestion{Argv: b.Redactor.RedactAll(s.Argv), Purpose: b.Redactor.Redact(purpose)})
	}
	return send(&termdv1.AdviseResponse{Chunk: &termdv1.AdviseResponse_Result{Result: out}})
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

// ForgetSessionAdvice drops a closed session's conversation.
func (b *Broker) forgetAdvice(sessionID string) {
	if b.Adviser != nil {
		b.Adviser.ForgetSession(sessionID)
	}
}
