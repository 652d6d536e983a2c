package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Shell completion of ids: asks the running termd (the socket from
// --socket / $TERMD_SOCKET) for the ids the verb takes, each with a short
// description, and completes nothing (not file names) when termd cannot be
// reached.

type idKind int

const (
	awaitingPlans idKind = iota // approve, deny
	runnablePlans               // execute
	anyPlans                    // replan
	runningIDs                  // output, pause, resume, cancel: executions and their sessions
	openSessions                // watch, sessions close
	receiptIDs                  // receipts show, receipts export
)

// completionTimeout bounds the daemon calls a <TAB> makes.
const completionTimeout = 2 * time.Second

// completeIDs completes the first argument with ids of kind.
func (a *app) completeIDs(kind idKind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := a.remote.dial(a.socket, client.Options{CallTimeout: completionTimeout})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		var out []cobra.Completion
		add := func(id, desc string) {
			if strings.HasPrefix(id, toComplete) {
				out = append(out, cobra.CompletionWithDesc(id, desc))
			}
		}
		switch kind {
		case awaitingPlans, runnablePlans, anyPlans:
			req := &termdv1.ListPlansRequest{Limit: 100}
			switch kind {
			case awaitingPlans:
				req.States = []termdv1.PlanState{termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL}
			case runnablePlans:
				req.States = []termdv1.PlanState{termdv1.PlanState_PLAN_STATE_PLANNED, termdv1.PlanState_PLAN_STATE_APPROVED}
			}
			resp, err := c.Plans.ListPlans(ctx, req)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, p := range resp.GetPlans() {
				add(p.GetId(), planStateWord(p.GetState())+": "+strings.Join(p.GetDecision().GetArgv(), " "))
			}
		case runningIDs, openSessions:
			if kind == runningIDs {
				if resp, err := c.Executions.ListExecutions(ctx, &termdv1.ListExecutionsRequest{States: activeStates}); err == nil {
					for _, le := range resp.GetExecutions() {
						add(le.GetExecution().GetId(), execStateWord(le.GetExecution().GetState())+": "+cmdline.Quote(le.GetArgv()))
					}
				}
			}
			resp, err := c.Sessions.ListSessions(ctx, &termdv1.ListSessionsRequest{})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, s := range resp.GetSessions() {
				label := s.GetLabel()
				if label == "" {
					label = "session"
				}
				if kind == openSessions || s.GetActiveExecutionId() != "" {
					add(s.GetId(), fmt.Sprintf("%s, %d plans", label, s.GetPlanCount()))
				}
			}
		case receiptIDs:
			resp, err := c.Receipts.ListReceipts(ctx, &termdv1.ListReceiptsRequest{Limit: 100})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, r := range resp.GetReceipts() {
				add(r.GetId(), r.GetStatus()+": "+r.GetCommand())
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeWords completes a flag from a fixed list.
func completeWords(words ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(words, cobra.ShellCompDirectiveNoFileComp)
}
