package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// detachKey then 'd' detaches (Ctrl-] d, as telnet's escape).
const detachKey = 0x1d

const detachHelp = "Ctrl-] then d"

func newAttach(a *app) *cobra.Command {
	var take, release bool
	cmd := &cobra.Command{
		Use:   "attach EXECUTION_ID [--take | --release]",
		Short: "Attach this terminal to a PTY execution: watch it, type into it",
		Long: `attach connects your terminal to a PTY execution (one started with
` + "`termctl run --tty`" + `, or a tty plan from an agent): it shows the current screen, then
its output as it comes, and sends what you type as input when you hold the
input (the requester holds it at first; --take takes it over: operators always,
the requester unless an operator holds it). Others just watch. Your terminal
is in raw mode while attached and is restored on every way out.

Detach with ` + detachHelp + `: the execution keeps running; attach again from any
terminal, or read it with ` + "`termctl screen`" + `. Ctrl-C is sent to the program (a real
SIGINT to its foreground process group), not to termctl. The window size
follows yours while you hold the input.

attach exits with the command's exit code when it ends while attached (as
run does), and 0 when you detach.

--release hands the input back to the execution's requester (the agent that
started it can type again) and returns without attaching: the holder who
took it, or an operator, may.`,
		Example: `  termctl attach 7d0a...c2
  termctl attach --take 7d0a...c2     # take the input over (an operator, or the requester)
  termctl attach --release 7d0a...c2  # hand it back to the requester`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(runningIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if take && release {
				return usageErr(errors.New("--take and --release do not go together: take the input, or hand it back"))
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			if release {
				return a.releaseInput(ctx, c, args[0])
			}
			return a.attach(ctx, c, args[0], take)
		},
	}
	cmd.Flags().BoolVar(&take, "take", false, "take the input over (operators, or the requester while no operator holds it)")
	cmd.Flags().BoolVar(&release, "release", false, "hand the input back to the execution's requester and return (its holder, or an operator)")
	return cmd
}

// releaseInput hands a terminal's input back to its requester.
func (a *app) releaseInput(ctx context.Context, c *client.Client, id string) error {
	resp, err := c.Terminals.ReleaseInput(ctx, &termdv1.ReleaseInputRequest{ExecutionId: id})
	if err != nil {
		return fmt.Errorf("handing back the input of %s: %w", id, err)
	}
	e := resp.GetExecution()
	if ok, err := a.printData(e); ok {
		return err
	}
	fmt.Fprintf(a.stdout, "execution %s: %s holds the input\n", e.GetId(), e.GetInputHolder())
	return nil
}

// attach runs one attached session; it returns the command's exit when the
// execution ends, nil when the user detaches.
func (a *app) attach(ctx context.Context, c *client.Client, id string, take bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A hang-up or termination ends the session (and restores the terminal).
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGHUP, syscall.SIGTERM)
	defer stopSignals()
	stream, err := c.Terminals.AttachTerminal(ctx, &termdv1.AttachTerminalRequest{ExecutionId: id, SinceOffset: -1, TakeInput: take})
	if err != nil {
		return fmt.Errorf("attaching to %s: %w", id, err)
	}
	first, err := stream.Recv()
	if err != nil {
		return fmt.Errorf("attaching to %s: %w", id, err)
	}
	in, _ := a.stdin.(*os.File)
	out, _ := a.stdout.(*os.File)
	raw := in != nil && term.IsTerminal(int(in.Fd()))
	nl := "\n"
	if raw {
		state, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		defer func() { _ = term.Restore(int(in.Fd()), state) }()
		nl = "\r\n"
	}
	fmt.Fprintf(a.stderr, "termctl: attached to %s; detach with %s%s", id, detachHelp, nl)
	a.paint(first.GetScreen(), out != nil && term.IsTerminal(int(out.Fd())))

	t := &attached{a: a, c: c, id: id, nl: nl, ctx: ctx}
	detached := make(chan struct{})
	if a.stdin != nil {
		go t.keys(a.stdin, detached, cancel)
	}
	if out != nil && term.IsTerminal(int(out.Fd())) {
		go t.follow(ctx, int(out.Fd()))
	}
	var ended *termdv1.Event
	for {
		m, err := stream.Recv()
		if err != nil {
			select {
			case <-detached:
				fmt.Fprintf(a.stderr, "%stermctl: detached from %s; it keeps running (`termctl attach %s`)%s", nl, id, id, nl)
				return nil
			default:
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%sdetached from %s: %w", nl, id, context.Cause(ctx))
			}
			return fmt.Errorf("%sattached to %s: %w", nl, id, err)
		}
		switch p := m.GetPayload().(type) {
		case *termdv1.AttachTerminalResponse_Output:
			_, _ = a.stdout.Write(p.Output.GetData())
		case *termdv1.AttachTerminalResponse_Event:
			t.event(p.Event)
			if p.Event.GetKind() == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
				ended = p.Event
			}
		}
		if ended != nil {
			break
		}
	}
	cancel()
	gctx, gcancel := context.WithTimeout(context.Background(), a.timeout())
	defer gcancel()
	ex, err := c.Execution(gctx, id)
	if err != nil {
		return err
	}
	fmt.Fprint(a.stderr, nl)
	return a.finish(ex, ended.GetReceipt())
}

// paint draws a screen: on a terminal, cleared and with the cursor placed;
// elsewhere, as text.
func (a *app) paint(s *termdv1.Screen, tty bool) {
	if s == nil {
		return
	}
	if !tty {
		if text := client.ScreenText(s); text != "" {
			fmt.Fprintln(a.stdout, text)
		}
		return
	}
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	b.WriteString(strings.Join(s.GetLines(), "\r\n"))
	fmt.Fprintf(&b, "\x1b[%d;%dH", s.GetCursorRow()+1, s.GetCursorCol()+1)
	_, _ = io.WriteString(a.stdout, b.String())
}

// attached is one attach session's input side.
type attached struct {
	a    *app
	c    *client.Client
	id   string
	nl   string
	ctx  context.Context
	once sync.Once // "you are watching" is said once
}

// keys forwards what is typed as input until the detach sequence.
func (t *attached) keys(r io.Reader, detached chan<- struct{}, cancel context.CancelFunc) {
	buf := make([]byte, 4096)
	pending := false // the detach key was the last byte read
	for {
		n, err := r.Read(buf)
		if n > 0 {
			data := buf[:n]
			var send []byte
			for _, b := range data {
				switch {
				case pending && b == 'd':
					if len(send) > 0 {
						t.send(send)
					}
					close(detached)
					cancel()
					return
				case pending:
					send = append(send, detachKey, b)
					pending = false
				case b == detachKey:
					pending = true
				default:
					send = append(send, b)
				}
			}
			if len(send) > 0 {
				t.send(send)
			}
		}
		if err != nil {
			return // stdin closed: keep watching until the end
		}
	}
}

func (t *attached) send(p []byte) {
	_, err := t.c.SendInput(t.ctx, &termdv1.SendInputRequest{ExecutionId: t.id, Inputs: []*termdv1.TerminalInput{{Input: &termdv1.TerminalInput_Data{Data: append([]byte(nil), p...)}}}})
	if err != nil && t.ctx.Err() == nil {
		if client.Code(err) == codes.PermissionDenied {
			t.once.Do(func() {
				fmt.Fprintf(t.a.stderr, "%stermctl: you are watching: %v%s", t.nl, err, t.nl)
			})
			return
		}
		fmt.Fprintf(t.a.stderr, "%stermctl: input not sent: %v%s", t.nl, err, t.nl)
	}
}

// follow sends the local window size, now and on every SIGWINCH.
func (t *attached) follow(ctx context.Context, fd int) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	for {
		if cols, rows, err := term.GetSize(fd); err == nil && rows > 0 && cols > 0 {
			// Only the input holder (or an operator) sets the size; a
			// watcher's refusal is expected.
			_, _ = t.c.Terminals.ResizeTerminal(ctx, &termdv1.ResizeTerminalRequest{ExecutionId: t.id, Size: &termdv1.TerminalOptions{Rows: uint32(rows), Cols: uint32(cols)}})
		}
		select {
		case <-ctx.Done():
			return
		case <-winch:
		}
	}
}

// event tells the user about what others do on the terminal.
func (t *attached) event(ev *termdv1.Event) {
	te := ev.GetTerminal()
	switch te.GetKind() {
	case "input_taken":
		fmt.Fprintf(t.a.stderr, "%stermctl: %s took the input (%s)%s", t.nl, te.GetBy(), te.GetText(), t.nl)
	case "input_released":
		fmt.Fprintf(t.a.stderr, "%stermctl: %s handed the input back (%s)%s", t.nl, te.GetBy(), te.GetText(), t.nl)
	}
}

// localSize is the size of the terminal on stdout (or stdin), if any.
func (a *app) localSize() (rows, cols uint32) {
	for _, f := range []any{a.stdout, a.stdin, a.stderr} {
		if file, ok := f.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
			if c, r, err := term.GetSize(int(file.Fd())); err == nil {
				return uint32(r), uint32(c)
			}
		}
	}
	return 0, 0
}
