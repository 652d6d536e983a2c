package cli

import (
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newApprove(a *app) *cobra.Command {
	var hash, remember, pattern string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "approve PLAN_ID",
		Short: "Approve a plan awaiting approval (operators)",
		Long: `approve approves one plan that is awaiting approval, for exactly the canonical
request it shows: argv, resolved program and its hash, working directory,
environment, mode and limits, summed up by the request hash. If the plan
changes (a replan), the hash changes and this approval does not carry over.

Only operators approve, and an agent's plan cannot be approved by that same
agent. Pass --hash to approve only if the plan still has the hash you saw in
` + "`termctl pending`" + `.

--remember makes the approval a grant (` + "`termctl grants`" + `), so later plans of the
same requester that the policy would ask about run without asking:
  once              this plan only (the default)
  request           this exact request (same request hash) for the rest of the session
  session-pattern   a pattern for the rest of the session
  workspace-request this exact request from any session of the same requester
                    until --ttl (default 8h, approvals.workspace_grant_ttl):
                    it survives an MCP client's restart, which opens a new session
  workspace-pattern a pattern in the plan's workspace until --ttl (default 7 days)
A pattern is the approved command with <any> for each operand (or option
value) that may vary: --pattern 'git commit -m <any>'. The program, its
subcommand and options stay fixed; the policy still decides every request,
a grant never turns a denial into an approval, and it covers only the same
program file (path and hash), policy version, entry files and sandbox profile.
--ttl caps a grant (at most approvals.max_grant_ttl, 30 days by default).`,
		Example: `  termctl pending
  termctl approve 3f1c...e9
  termctl approve 3f1c...e9 --hash 9b2e...41
  termctl approve 3f1c...e9 --remember session-pattern --pattern 'git commit -m <any>'
  termctl approve 3f1c...e9 --remember workspace-request --ttl 4h
  termctl approve 3f1c...e9 --remember workspace-pattern --pattern 'npm install <any>' --ttl 72h`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(awaitingPlans),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			p, err := c.Plan(ctx, args[0])
			if err != nil {
				return fmt.Errorf("reading plan %s: %w", args[0], err)
			}
			want := p.GetDecision().GetRequestHash()
			if hash != "" && hash != want {
				return exitWith(ExitRefused, fmt.Errorf("plan %s now has request hash %s, not the %s you gave: review it again with `termctl pending`", p.Id, want, hash))
			}
			spec, err := grantSpec(remember, pattern, ttl)
			if err != nil {
				return err
			}
			resp, err := c.Plans.ApprovePlan(ctx, &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: want, Grant: spec})
			if err != nil {
				return fmt.Errorf("approving plan %s: %w", p.Id, err)
			}
			if resp.Grant != nil {
				if ok, err := a.printData(resp); ok {
					return err
				}
			} else if ok, err := a.printData(resp.Plan); ok {
				return err
			}
			fmt.Fprintf(a.stdout, "approved plan %s for this canonical request:\n", p.Id)
			if err := canonicalLines(a.stdout, resp.Plan); err != nil {
				return err
			}
			if exp := fmtTime(resp.Plan.ExpiresAt); exp != "" {
				fmt.Fprintf(a.stdout, "the approval is good once, until %s\n", exp)
			}
			if g := resp.Grant; g != nil {
				fmt.Fprintf(a.stdout, "grant %s (%s) covers %s until %s; revoke it with `termctl grants revoke %s`\n", g.Id, grantScopeWord(g.Scope), grantWhat(g), fmtTime(g.ExpiresAt), g.Id)
			}
			fmt.Fprintf(a.stdout, "next: termctl execute %s --follow\n", p.Id)
			return nil
		},
	}
	cmd.Flags().StringVar(&hash, "hash", "", "approve only if the plan's request hash is this one")
	cmd.Flags().StringVar(&remember, "remember", "once", "remember the approval: once, request, session-pattern, workspace-request or workspace-pattern")
	cmd.Flags().StringVar(&pattern, "pattern", "", "with a pattern scope: the command with <any> for operands that may vary")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "with --remember: how long the grant lasts (at most the daemon's approvals.max_grant_ttl, 720h by default)")
	return cmd
}

// grantSpec turns the approve flags into the API's grant request.
func grantSpec(remember, pattern string, ttl time.Duration) (*termdv1.GrantSpec, error) {
	scope, ok := grantScopes[remember]
	if !ok {
		return nil, usageErr(fmt.Errorf("--remember %q: want once, request, session-pattern, workspace-request or workspace-pattern", remember))
	}
	// The daemon holds the upper bound (approvals.max_grant_ttl).
	if ttl < 0 || (ttl > 0 && ttl < time.Second) || ttl/time.Second > math.MaxUint32 {
		return nil, usageErr(fmt.Errorf("--ttl %s: give a duration of at least 1s, such as 8h (the daemon caps it at approvals.max_grant_ttl, 720h by default)", ttl))
	}
	if pattern != "" && scope != termdv1.GrantScope_GRANT_SCOPE_SESSION_PATTERN && scope != termdv1.GrantScope_GRANT_SCOPE_WORKSPACE_PATTERN {
		return nil, usageErr(fmt.Errorf("--pattern needs --remember session-pattern or workspace-pattern"))
	}
	if scope == termdv1.GrantScope_GRANT_SCOPE_ONCE {
		if ttl != 0 {
			return nil, usageErr(fmt.Errorf("--ttl needs --remember request, session-pattern, workspace-request or workspace-pattern"))
		}
		return nil, nil
	}
	return &termdv1.GrantSpec{Scope: scope, Pattern: pattern, TtlSeconds: uint32(ttl / time.Second)}, nil
}
