package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newAsk(a *app) *cobra.Command {
	var (
		session, explain, diagnose, suggest string
		reasoning                           bool
	)
	cmd := &cobra.Command{
		Use:   `ask [--session ID] "QUESTION" | --explain PLAN_ID | --diagnose RECEIPT_ID | --suggest "TASK"`,
		Short: "Ask the adviser: a question, explain a plan, diagnose a failure, suggest commands",
		Long: `ask streams advice from the model adviser termd is configured with. The advice
is text: nothing runs because of it. Suggested commands are printed as argv
for you to plan yourself (` + "`termctl plan -- ...`" + `), where the same policy decides
them. Explaining a plan may flag it for approval; it never makes a plan
easier to run.

  ask "QUESTION"            a free question, in your session's conversation
  ask --explain PLAN_ID     what a plan does and why policy decided it so
  ask --diagnose RECEIPT_ID why a command failed, from its receipt
  ask --suggest "TASK"      candidate commands for a task

When termd has no adviser configured, ask says so in one line (exit 1).`,
		Example: `  termctl ask --suggest "find the largest files under src"
  termctl ask --explain 3f1c...e9
  termctl ask --diagnose 0b7e...31`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &termdv1.AdviseRequest{SessionId: session, IncludeReasoning: reasoning}
			question := strings.TrimSpace(strings.Join(args, " "))
			n := 0
			for _, s := range []string{explain, diagnose, suggest} {
				if s != "" {
					n++
				}
			}
			switch {
			case n > 1:
				return usageErr(errors.New("give one of --explain, --diagnose or --suggest"))
			case explain != "":
				req.Intent, req.PlanId, req.Question = termdv1.AdviseIntent_ADVISE_INTENT_EXPLAIN, explain, question
			case diagnose != "":
				req.Intent, req.ReceiptId, req.Question = termdv1.AdviseIntent_ADVISE_INTENT_DIAGNOSE, diagnose, question
			case suggest != "":
				req.Intent, req.Question = termdv1.AdviseIntent_ADVISE_INTENT_SUGGEST, strings.TrimSpace(suggest+" "+question)
			case question != "":
				req.Intent, req.Question = termdv1.AdviseIntent_ADVISE_INTENT_ASK, question
			default:
				return usageErr(errors.New(`nothing to ask: give a "QUESTION", --explain PLAN_ID, --diagnose RECEIPT_ID or --suggest "TASK"`))
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			return a.ask(ctx, c, req)
		},
	}
	f := cmd.Flags()
	f.StringVar(&session, "session", "", "session whose conversation to continue (default: your most recent)")
	f.StringVar(&explain, "explain", "", "explain this plan and its decision")
	f.StringVar(&diagnose, "diagnose", "", "diagnose the failure recorded in this receipt")
	f.StringVar(&suggest, "suggest", "", "suggest commands for this task")
	f.BoolVar(&reasoning, "reasoning", false, "also show the model's reasoning (on stderr)")
	return cmd
}

func (a *app) ask(ctx context.Context, c *client.Client, req *termdv1.AdviseRequest) error {
	// termd answers status even without an adviser; asking first tells "termd
	// is down" apart from "no adviser configured".
	sctx, cancel := context.WithTimeout(ctx, a.timeout())
	st, err := c.Status(sctx)
	cancel()
	if err != nil {
		return err
	}
	if !st.AdviserAvailable {
		detail := strings.TrimLeft(strings.TrimPrefix(st.AdviserDetail, "unavailable"), ": ")
		return exitWith(ExitError, fmt.Errorf("the adviser is unavailable%s", colonIf(detail)))
	}
	stream, err := c.Adviser.Advise(ctx, req)
	if err != nil {
		return adviseErr(err)
	}
	stop := a.spin("thinking")
	defer stop()
	live := a.output == "table"
	var result *termdv1.AdviceResult
	wroteText := false
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if wroteText {
				fmt.Fprintln(a.stdout)
			}
			return adviseErr(err)
		}
		switch ch := m.Chunk.(type) {
		case *termdv1.AdviseResponse_TextDelta:
			stop()
			if live {
				fmt.Fprint(a.stdout, ch.TextDelta)
				wroteText = true
			}
		case *termdv1.AdviseResponse_ReasoningDelta:
			stop()
			if live {
				fmt.Fprint(a.stderr, a.color(a.stderr, "2", ch.ReasoningDelta))
			}
		case *termdv1.AdviseResponse_Result:
			result = ch.Result
		}
	}
	stop()
	if result == nil {
		if wroteText {
			fmt.Fprintln(a.stdout)
		}
		return errors.New("the adviser's answer ended without a result; try again")
	}
	if ok, err := a.printData(result); ok {
		return err
	}
	if !wroteText && result.Text != "" {
		fmt.Fprint(a.stdout, result.Text)
		wroteText = true
	}
	if wroteText {
		fmt.Fprintln(a.stdout)
	}
	if len(result.Suggestions) > 0 {
		fmt.Fprintln(a.stdout, "\nsuggested commands (nothing runs until you plan one; policy decides it like any other):")
		for _, s := range result.Suggestions {
			line := "  termctl plan -- " + cmdline.Quote(s.Argv)
			if s.Purpose != "" {
				line += "    # " + s.Purpose
			}
			fmt.Fprintln(a.stdout, line)
		}
	}
	if result.Flagged {
		fmt.Fprintln(a.stdout, "\nthe adviser flagged this plan: it now needs an operator's approval in every mode")
	}
	for _, w := range result.Warnings {
		fmt.Fprintln(a.stderr, "termctl: adviser warning:", w)
	}
	return nil
}

// adviseErr words adviser errors; Unavailable here means the adviser (its
// API), since termd itself just answered.
func adviseErr(err error) error {
	var e *client.Error
	if errors.As(err, &e) && e.Code == codes.Unavailable {
		return exitWith(ExitError, errors.New("the adviser is unavailable right now; try again later"))
	}
	if client.Code(err) == codes.FailedPrecondition && strings.Contains(strings.ToLower(err.Error()), "unavailable") {
		return exitWith(ExitError, fmt.Errorf("the adviser is unavailable: %v", err))
	}
	return fmt.Errorf("asking the adviser: %w", err)
}

func colonIf(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
