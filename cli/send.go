package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newSend(a *app) *cobra.Command {
	var (
		line, text, key []string
		wait            bool
		quietMS         uint32
		timeoutMS       uint32
		pattern         string
	)
	cmd := &cobra.Command{
		Use:   "send EXECUTION_ID [--line TEXT | --text TEXT | --key NAME]... [--wait] [--quiet-ms N] [--pattern RE]",
		Short: "Type into a PTY execution and, with --wait, read the screen when it is ready",
		Long: `send writes input to a PTY execution whose input you hold: --line TEXT (TEXT
and Enter), --text TEXT (no Enter), --key NAME (enter, tab, backspace, escape,
up, down, left, right, home, end, page_up, page_down, ctrl_c, ctrl_d, ctrl_z).
They may repeat; --line, then --text, then --key are sent in that order (send
twice for another order). Ctrl-C is a real SIGINT to the program's foreground
process group.

With --wait, send returns when the program is ready for more input and says
why (stderr): waiting_for_input (it is blocked reading its terminal), quiet
(no output for --quiet-ms), pattern (--pattern matched the screen), exited,
or timeout (--timeout-ms, default 10000). It then prints the rendered screen
(stdout). -o json prints the whole answer, with output_text: the output since
the input, escape codes removed.

What you type into an interpreter is code: it is recorded (redacted, with its
sha256) in the execution's events and receipt.`,
		Example: `  termctl send 7d0a...c2 --line '1+1' --wait
  termctl send 7d0a...c2 --key ctrl_c --wait --quiet-ms 300
  termctl send 7d0a...c2 --text y --wait --pattern '\[Y/n\]'`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(runningIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in []*termdv1.TerminalInput
			for _, l := range line {
				in = append(in, &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Line{Line: l}})
			}
			for _, t := range text {
				in = append(in, &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Text{Text: t}})
			}
			for _, k := range key {
				kk, err := client.ParseKey(k)
				if err != nil {
					return usageErr(fmt.Errorf("--key: %w", err))
				}
				in = append(in, &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Key{Key: kk}})
			}
			if len(in) == 0 {
				return usageErr(fmt.Errorf("nothing to send: give --line TEXT, --text TEXT or --key NAME"))
			}
			if !wait && (quietMS > 0 || pattern != "" || timeoutMS > 0) {
				return usageErr(fmt.Errorf("--quiet-ms, --pattern and --timeout-ms need --wait"))
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			r, err := c.SendInput(ctx, &termdv1.SendInputRequest{ExecutionId: args[0], Inputs: in,
				Wait: &termdv1.WaitSpec{Wait: wait, TimeoutMs: timeoutMS, QuietMs: quietMS, Pattern: pattern}})
			if err != nil {
				return fmt.Errorf("sending to %s: %w", args[0], err)
			}
			if done, err := a.printData(r); done {
				return err
			}
			if wait {
				fmt.Fprintln(a.stderr, "termctl: ready:", client.ReadyWord(r.GetReady()))
			}
			if s := client.ScreenText(r.GetScreen()); s != "" {
				fmt.Fprintln(a.stdout, s)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&line, "line", nil, "send `TEXT` and Enter (repeatable)")
	f.StringArrayVar(&text, "text", nil, "send `TEXT` as typed, without Enter (repeatable)")
	f.StringArrayVar(&key, "key", nil, "send a named key, e.g. enter, ctrl_c, up (repeatable)")
	f.BoolVar(&wait, "wait", false, "return when the program is ready for more input, and say why")
	f.Uint32Var(&quietMS, "quiet-ms", 0, "with --wait: also ready after this many ms without output")
	f.Uint32Var(&timeoutMS, "timeout-ms", 0, "with --wait: give up after this many ms (default 10000, at most 300000)")
	f.StringVar(&pattern, "pattern", "", "with --wait: also ready when the screen matches this regular expression")
	_ = cmd.RegisterFlagCompletionFunc("key", completeWords(client.KeyNames()...))
	return cmd
}
