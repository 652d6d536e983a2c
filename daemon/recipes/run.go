package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
	"github.com/termd/termd/recipe"
)

// Run outcomes.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// receiptGrace is how long past the recipe's time limit a run waits for the
// receipt of a step the runner is already ending.
const receiptGrace = 10 * time.Second

// Run validates a recipe again with the live policy and runs its steps in
// order, each as a plan of the caller. A recipe that does not validate runs
// nothing (FAILED_PRECONDITION naming every problem). A step that fails, is
// refused at run time, or meets the time limit ends the run (an optional
// step's failure does not); what ran keeps its receipts.
func (s *Service) Run(ctx context.Context, caller *termdv1.Principal, req *termdv1.RunRecipeRequest) (*termdv1.RunRecipeResponse, error) {
	r, probs, err := s.resolve(req.Name, req.Text)
	if err != nil {
		return nil, err
	}
	if len(probs) == 0 {
		_, probs = s.check(ctx, caller, r, req.Dir)
	}
	if len(probs) > 0 {
		name := r.GetName()
		if name == "" {
			name = "from the request"
		}
		return nil, errdefs.Precondition("recipe %s cannot run: %s", name, strings.Join(probs, "; "))
	}
	start := s.now()
	deadline := start.Add(time.Duration(r.Limits.TimeoutSeconds) * time.Second)
	sessionID := req.SessionId
	if sessionID == "" {
		ss, err := s.b.CreateSession(ctx, caller, "recipe "+r.Name)
		if err != nil {
			return nil, err
		}
		sessionID = ss.Id
	}
	resp := &termdv1.RunRecipeResponse{Recipe: r.Name, Status: StatusSucceeded, SessionId: sessionID, Dir: req.Dir}
	runCtx, cancel := context.WithDeadline(ctx, deadline.Add(receiptGrace))
	defer cancel()
	budget := r.Limits.OutputBytes
	for i, st := range r.Steps {
		n := i + 1
		left := deadline.Sub(s.now())
		if left < time.Second {
			fail(resp, fmt.Sprintf("the recipe's time limit (%ds) ran out before step %d", r.Limits.TimeoutSeconds, n))
			break
		}
		timeout := stepTimeout(r, st)
		if secs := uint32(left / time.Second); secs < timeout {
			timeout = secs
		}
		res, problem := s.runStep(runCtx, caller, r, st, n, req.Dir, sessionID, timeout, &budget)
		if res != nil {
			resp.Steps = append(resp.Steps, res)
		}
		if problem != "" {
			if res != nil && st.Optional {
				continue
			}
			fail(resp, problem)
			break
		}
	}
	resp.DurationMs = s.now().Sub(start).Milliseconds()
	return resp, nil
}

// fail marks a run failed with why.
func fail(resp *termdv1.RunRecipeResponse, why string) {
	resp.Status = StatusFailed
	resp.Problems = append(resp.Problems, why)
}

// runStep plans one step, checks the decision again (the policy may have
// changed since validation), runs it and reads its receipt. A problem with
// a nil result means nothing ran.
func (s *Service) runStep(ctx context.Context, caller *termdv1.Principal, r *termdv1.Recipe, st *termdv1.RecipeStep, n int, dir, sessionID string, timeout uint32, budget *int64) (*termdv1.StepResult, string) {
	cr := stepRequest(st, dir, timeout)
	// Decide first without a plan, so a step that now asks leaves nothing
	// in the approval queue; then the plan decides again.
	d, _, err := s.b.CheckPolicy(ctx, caller, cr)
	if err != nil {
		return nil, fmt.Sprintf("step %d (%q): %v", n, st.Name, err)
	}
	if p := stepProblem(n, st, d); p != "" {
		return nil, p
	}
	plan, err := s.b.CreatePlan(ctx, caller, sessionID, cr)
	if err != nil {
		return nil, fmt.Sprintf("step %d (%q): %v", n, st.Name, err)
	}
	res := &termdv1.StepResult{Index: uint32(n), Name: st.Name, Argv: st.Argv, PlanId: plan.Id, Why: st.Why, ExitCode: -1}
	if p := stepProblem(n, st, plan.Decision); p != "" {
		res.Status = "blocked"
		return res, p
	}
	var receiptID string
	err = s.b.ExecuteAndWait(ctx, caller, plan.Id, sessionID, false, func(evs []*termdv1.Event) error {
		for _, ev := range evs {
			if rs := ev.GetReceipt(); rs != nil && rs.PlanId == plan.Id {
				receiptID = rs.Id
			}
		}
		return nil
	})
	if err != nil && receiptID == "" {
		if errors.Is(err, context.DeadlineExceeded) {
			return res, fmt.Sprintf("step %d (%q) did not finish within the recipe's time limit (%ds)", n, st.Name, r.Limits.TimeoutSeconds)
		}
		return res, fmt.Sprintf("step %d (%q) could not run: %v", n, st.Name, err)
	}
	// Read the receipt even when the caller went away: it exists.
	rc, err := s.b.GetReceipt(context.WithoutCancel(ctx), caller, receiptID, "")
	if err != nil {
		return res, fmt.Sprintf("step %d (%q): reading its receipt %s: %v", n, st.Name, receiptID, err)
	}
	fillResult(res, rc, st, budget)
	if !res.Ok {
		return res, stepFailure(n, st, rc)
	}
	return res, ""
}

// fillResult copies a receipt into a step result, within the output budget.
func fillResult(res *termdv1.StepResult, rc *receipt.Receipt, st *termdv1.RecipeStep, budget *int64) {
	res.ReceiptId = rc.ID
	res.Status = string(rc.Status)
	res.DurationMs = rc.DurationMs
	if rc.ExitCode != nil {
		res.ExitCode = int32(*rc.ExitCode)
		ended := rc.Status == receipt.StatusSucceeded || rc.Status == receipt.StatusFailed
		res.Ok = ended && recipe.OK(st, res.ExitCode)
	}
	res.Truncated = rc.OutputTruncated || rc.StdoutTruncated || rc.StderrTruncated
	var cut bool
	res.Stdout, cut = take(rc.Stdout, budget)
	res.Truncated = res.Truncated || cut
	res.Stderr, cut = take(rc.Stderr, budget)
	res.Truncated = res.Truncated || cut
}

// take returns as much of s as the budget holds, cut at a UTF-8 boundary.
func take(s string, budget *int64) (string, bool) {
	if int64(len(s)) <= *budget {
		*budget -= int64(len(s))
		return s, false
	}
	n := int(*budget)
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	*budget = 0
	return s[:n], true
}

func stepFailure(n int, st *termdv1.RecipeStep, rc *receipt.Receipt) string {
	what := string(rc.Status)
	if rc.ExitCode != nil {
		what = fmt.Sprintf("%s with exit code %d", rc.Status, *rc.ExitCode)
	}
	if rc.Detail != "" {
		what += " (" + rc.Detail + ")"
	}
	return fmt.Sprintf("step %d (%q) %s; receipt %s", n, st.Name, what, rc.ID)
}
