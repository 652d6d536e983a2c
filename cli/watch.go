package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newWatch(a *app) *cobra.Command {
	var (
		since   uint64
		history bool
	)
	cmd := &cobra.Command{
		Use:   "watch [SESSION_ID]",
		Short: "Follow events live: plans, approvals, output, results, receipts",
		Long: `watch prints events as they happen, from now on: in one session, or in every
session you may see when no session is given. --history starts with the
oldest events termd still holds instead; --since N replays the events after
sequence number N. Each line starts with the event's sequence number. If the connection drops (termd restarts, or the stream is cut), watch
reconnects with backoff and resumes after the last event it printed, so
nothing is printed twice or skipped while termd keeps it. It stops when the
session closes; Ctrl-C stops it any time.

-o json prints one JSON event per line (NDJSON).`,
		Example: `  termctl watch                     # everything you may see
  termctl watch 5e2b...a0           # one session
  termctl watch --history           # what termd still holds, then live
  termctl watch -o json | jq .kind`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeIDs(openSessions),
		RunE: func(cmd *cobra.Command, args []string) error {
			session := ""
			if len(args) == 1 {
				session = args[0]
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			return a.watch(ctx, c, session, since, history)
		},
	}
	cmd.Flags().Uint64Var(&since, "since", 0, "replay events after this sequence number (session seq, or global seq without a session)")
	cmd.Flags().BoolVar(&history, "history", false, "start with the oldest events termd still holds, not at now")
	return cmd
}

// watch streams events, reconnecting and resuming after the last one seen.
func (a *app) watch(ctx context.Context, c *client.Client, session string, cursor uint64, history bool) error {
	const maxBackoff = 5 * time.Second
	backoff := 200 * time.Millisecond
	var started time.Time // daemon start time, to notice a restart
	dropped := false
	for {
		if ctx.Err() != nil {
			return nil
		}
		// A restarted daemon numbers its events afresh: resuming from the old
		// cursor would skip the new ones.
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := c.Status(sctx)
		scancel()
		if err == nil {
			t := st.GetStartedAt().AsTime()
			if !started.IsZero() && !t.Equal(started) {
				fmt.Fprintln(a.stderr, "termctl: termd restarted; following its new events")
				cursor, history = 0, true // every event of the new daemon is new
			}
			started = t
		}
		var closed bool
		var got int
		if err == nil {
			closed, got, err = a.watchOnce(ctx, c, session, &cursor, history)
			if closed {
				return nil
			}
			if err == nil {
				err = io.EOF
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		switch client.Code(err) {
		case codes.NotFound:
			// A session closed long ago has no events left: that is the end.
			if sessionClosed(ctx, c, session) {
				return nil
			}
			return fmt.Errorf("watching %s: %w", orAll(session), err)
		case codes.PermissionDenied, codes.InvalidArgument, codes.Unauthenticated:
			return fmt.Errorf("watching %s: %w", orAll(session), err)
		}
		if got > 0 {
			backoff = 200 * time.Millisecond
		}
		if !dropped || got > 0 {
			fmt.Fprintf(a.stderr, "termctl: event stream dropped (%v); reconnecting\n", shortErr(err))
		}
		dropped = true
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// watchOnce reads one stream until it ends. It reports whether the watched
// session closed, and how many events it printed.
func (a *app) watchOnce(ctx context.Context, c *client.Client, session string, cursor *uint64, history bool) (closed bool, n int, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SessionId: session, SinceSeq: *cursor, History: history})
	if err != nil {
		return false, 0, err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) && session != "" {
				// A session stream ends when the session closes; make sure
				// that was why (not a daemon stopping) before giving up.
				gctx, gcancel := context.WithTimeout(context.Background(), 5*time.Second)
				s, gerr := c.Session(gctx, session)
				gcancel()
				if gerr == nil && s.GetClosed() {
					return true, n, nil
				}
			}
			return false, n, err
		}
		ev := m.GetEvent()
		if ev == nil {
			continue
		}
		if session != "" {
			*cursor = max(*cursor, ev.Seq)
		} else {
			*cursor = max(*cursor, ev.GlobalSeq)
		}
		n++
		if err := a.printEvent(ev, session == ""); err != nil {
			return false, n, err
		}
		if session != "" && ev.Kind == termdv1.EventKind_EVENT_KIND_SESSION_CLOSED {
			return true, n, nil
		}
	}
}

func (a *app) printEvent(ev *termdv1.Event, global bool) error {
	if a.output != "table" {
		if a.output == "json" {
			raw, err := toJSON(ev)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, string(raw))
			return err
		}
		_, err := a.printData(ev)
		if err == nil {
			_, err = fmt.Fprintln(a.stdout, "---")
		}
		return err
	}
	seq := ev.Seq
	if global {
		seq = ev.GlobalSeq
	}
	at := ""
	if ev.Time != nil {
		at = ev.Time.AsTime().Local().Format("15:04:05")
	}
	sess := ""
	if global && ev.SessionId != "" {
		sess = ev.SessionId + " "
	}
	_, err := fmt.Fprintf(a.stdout, "%6d %s %s%-17s %s\n", seq, at, sess, eventKindWord(ev.Kind), eventDetail(ev))
	return err
}

func eventDetail(ev *termdv1.Event) string {
	switch p := ev.Payload.(type) {
	case *termdv1.Event_Plan:
		d := p.Plan.GetDecision()
		s := fmt.Sprintf("plan %s %s (%s, %s): %s", p.Plan.Id, planStateWord(p.Plan.State), verdictWord(d.GetVerdict()), riskWord(d.GetRisk()), cmdline.Quote(d.GetArgv()))
		if dn := p.Plan.GetDenial(); dn != nil && dn.Reason != "" {
			s += ": " + dn.Reason
		}
		return s
	case *termdv1.Event_Execution:
		ex := p.Execution
		s := fmt.Sprintf("execution %s %s", ex.Id, execStateWord(ex.State))
		switch ex.State {
		case termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED, termdv1.ExecutionState_EXECUTION_STATE_FAILED:
			s += fmt.Sprintf(" exit %d", ex.ExitCode)
		}
		if ex.Signal != "" {
			s += " " + ex.Signal
		}
		return s
	case *termdv1.Event_Output:
		data := strings.TrimRight(string(p.Output.Data), "\n")
		if len(data) > 200 {
			data = data[:200] + "…"
		}
		return fmt.Sprintf("%s: %s", streamWord(p.Output.Stream), strings.ReplaceAll(data, "\n", "\n"+strings.Repeat(" ", 8)))
	case *termdv1.Event_Lagged:
		return fmt.Sprintf("missed %d events (the reader fell behind); continuing with the oldest held", p.Lagged.Dropped)
	case *termdv1.Event_Session:
		return "session " + p.Session.Id
	case *termdv1.Event_Receipt:
		return fmt.Sprintf("receipt %s %s", p.Receipt.Id, p.Receipt.Status)
	case *termdv1.Event_Terminal:
		te := p.Terminal
		s := fmt.Sprintf("terminal %s %s by %s", te.ExecutionId, te.Kind, te.By)
		if te.Text != "" {
			s += ": " + te.Text
		}
		return s
	case *termdv1.Event_EgressRefused:
		r := p.EgressRefused
		return fmt.Sprintf("egress refused %s:%d for %s (allow-list %s, %s): %s", r.Host, r.Port, r.ExecutionId, r.AllowList, r.Reason, r.Detail)
	case *termdv1.Event_PortForward:
		pe := p.PortForward
		s := fmt.Sprintf("forward %s %s by %s: http://%s -> 127.0.0.1:%d in the loopback of %s (%s)", pe.ForwardId, pe.Kind, pe.By, pe.LocalAddress, pe.RemotePort, pe.Principal, pe.Workspace)
		if pe.Reason != "" {
			s += ": " + pe.Reason
		}
		return s
	}
	return ""
}

// sessionClosed says whether a session exists and is closed.
func sessionClosed(ctx context.Context, c *client.Client, session string) bool {
	if session == "" {
		return false
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := c.Session(gctx, session)
	return err == nil && s.GetClosed()
}

func orAll(session string) string {
	if session == "" {
		return "all sessions"
	}
	return "session " + session
}

func shortErr(err error) string {
	if errors.Is(err, io.EOF) {
		return "termd ended the stream"
	}
	var e *client.Error
	if errors.As(err, &e) {
		if e.Code == codes.Unavailable {
			return "termd is not reachable"
		}
		return e.Message
	}
	return err.Error()
}
