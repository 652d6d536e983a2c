package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// control.go holds the three verbs that steer a running execution: pause,
// resume and cancel. They differ only in the call they make.

var (
	newPause = controlVerb("pause", "Freeze a running command (every process it started)",
		`pause freezes every process of a running execution (cgroup freezer, or
SIGSTOP where there is none). Its time limit keeps counting.`,
		(*client.Client).PauseExecution, "paused")
	newResume = controlVerb("resume", "Resume a paused command",
		`resume thaws an execution that pause froze.`,
		(*client.Client).ResumeExecution, "resumed")
	newCancel = controlVerb("cancel", "Cancel a running or paused command (it still gets a receipt)",
		`cancel ends an execution, running or paused: its processes get SIGTERM, then
SIGKILL after a grace period. The execution ends "cancelled" with a signed
receipt, and whoever follows it exits 130.`,
		(*client.Client).CancelExecution, "cancelled")
)

func controlVerb(name, short, long string, call func(*client.Client, context.Context, string) (*termdv1.Execution, error), done string) func(*app) *cobra.Command {
	return func(a *app) *cobra.Command {
		return &cobra.Command{
			Use:   name + " EXECUTION_ID|SESSION_ID",
			Short: short,
			Long:  long + "\n\nGive an execution id, or a session id to mean that session's running execution.",
			Example: "  termctl " + name + " 7d0a...c2        # an execution\n" +
				"  termctl " + name + " $(termctl sessions list -o json | jq -r '.sessions[0].id')",
			Args:              cobra.ExactArgs(1),
			ValidArgsFunction: a.completeIDs(runningIDs),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx, c, err := a.dial(cmd)
				if err != nil {
					return err
				}
				id, err := resolveExecution(ctx, c, args[0])
				if err != nil {
					return err
				}
				ex, err := call(c, ctx, id)
				if err != nil {
					return fmt.Errorf("%s execution %s: %w", name, id, err)
				}
				if ok, err := a.printData(ex); ok {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "%s execution %s (now %s)\n", done, ex.GetId(), execStateWord(ex.GetState()))
				return err
			},
		}
	}
}

// resolveExecution accepts an execution id, or a session id meaning its
// active execution.
func resolveExecution(ctx context.Context, c *client.Client, id string) (string, error) {
	_, err := c.Execution(ctx, id)
	if err == nil {
		return id, nil
	}
	if code := client.Code(err); code != codes.NotFound && code != codes.InvalidArgument {
		return "", fmt.Errorf("looking up execution %s: %w", id, err)
	}
	s, serr := c.Session(ctx, id)
	if serr != nil {
		if client.Code(serr) == codes.NotFound || client.Code(serr) == codes.InvalidArgument {
			return "", exitWith(ExitError, errors.New("no execution or session "+id+" that you may see: `termctl sessions list` shows sessions and what runs in them"))
		}
		return "", fmt.Errorf("looking up session %s: %w", id, serr)
	}
	if s.GetActiveExecutionId() == "" {
		return "", fmt.Errorf("session %s has no running execution", id)
	}
	return s.GetActiveExecutionId(), nil
}
