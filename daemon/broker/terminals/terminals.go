package terminals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/internal/vt"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Host is what the terminals need of the broker.
type Host interface {
	// Find returns the terminal of execution id when caller may see the
	// execution (nil when it has none), or why not (not found).
	Find(caller *termdv1.Principal, id string) (*Hub, error)
	// AcquireStream counts an attached client against the caller's open
	// event streams; release uncounts it.
	AcquireStream(caller *termdv1.Principal) (release func(), err error)
	// Bus carries the sessions' events.
	Bus() *events.Bus
	// Now is the broker's clock.
	Now() time.Time
	// EventOf says whether a session event concerns execution execID of
	// plan planID (its state, output, receipt).
	EventOf(ev *termdv1.Event, execID, planID string) bool
}

// Terminals serves the terminal calls on the broker's hubs.
type Terminals struct {
	host Host
}

// New returns the terminals of a broker.
func New(host Host) *Terminals { return &Terminals{host: host} }

// find finds the terminal of an execution the caller may see.
func (t *Terminals) find(caller *termdv1.Principal, id string) (*Hub, error) {
	h, err := t.host.Find(caller, id)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errdefs.Precondition("execution %s has no terminal; plan the command with a terminal (`termctl run --tty -- …`)", id)
	}
	return h, nil
}

// running is find for a terminal whose program still runs.
func (t *Terminals) running(caller *termdv1.Principal, id string) (*Hub, *runner.Process, error) {
	h, err := t.find(caller, id)
	if err != nil {
		return nil, nil, err
	}
	proc := h.proc.Load()
	snap, finished := h.x.Snapshot()
	if finished || proc == nil {
		word := strings.ToLower(strings.TrimPrefix(snap.GetState().String(), "EXECUTION_STATE_"))
		return nil, nil, errdefs.Precondition("execution %s is %s; its terminal takes no more input", id, word)
	}
	return h, proc, nil
}

// SendInput writes input to a terminal the caller holds the input of and,
// with wait, returns when the program is ready for more.
func (t *Terminals) SendInput(ctx context.Context, caller *termdv1.Principal, r *termdv1.SendInputRequest) (*termdv1.SendInputResponse, error) {
	spec, err := waitSpec(r.GetWait())
	if err != nil {
		return nil, err
	}
	h, proc, err := t.running(caller, r.GetExecutionId())
	if err != nil {
		return nil, err
	}
	var raw []byte
	var shown string
	if len(r.GetInputs()) > 0 || !r.GetWait().GetWait() {
		h.mu.Lock()
		appCursor := h.screen.Snapshot().AppCursorKeys
		h.mu.Unlock()
		if raw, shown, err = encodeInputs(r.GetInputs(), appCursor); err != nil {
			return nil, err
		}
	} // no input with a wait: just wait (for the first prompt)
	h.mu.Lock()
	if domain.PrincipalKey(h.holder) != domain.PrincipalKey(caller) {
		holder := h.holder.GetName()
		h.mu.Unlock()
		return nil, errdefs.Permission("the input of execution %s is held by %s; %s", h.x.ID, holder, h.takeHint(caller))
	}
	if h.ended {
		h.mu.Unlock()
		return nil, errdefs.Precondition("execution %s has ended; its terminal takes no more input", h.x.ID)
	}
	startOff := h.offset
	if len(raw) > 0 {
		h.sending.Add(1)
	}
	h.mu.Unlock()
	if len(raw) > 0 {
		err := proc.WriteTerminal(raw)
		if err == nil {
			sum := sha256.Sum256(raw)
			h.record(caller, "input", clipText(h.x.Redactor.Redact(shown), maxInputText), hex.EncodeToString(sum[:]), nil)
		}
		h.sending.Done()
		if err != nil {
			return nil, errdefs.Precondition("execution %s: writing to its terminal failed (%v); it has probably ended", h.x.ID, err)
		}
	}
	out := &termdv1.SendInputResponse{}
	if r.GetWait().GetWait() {
		reason, err := h.wait(ctx, proc, spec)
		if err != nil {
			return nil, err
		}
		out.Ready = reason
	}
	h.mu.Lock()
	produced := h.sinceLocked(startOff)
	out.OutputOffset = h.offset
	h.mu.Unlock()
	text := vt.Sanitize(produced)
	if len(text) > maxOutputText {
		text = "…" + text[len(text)-maxOutputText:]
	}
	out.OutputText = h.x.Redactor.Redact(text)
	out.Screen = h.screenProto()
	out.Execution = h.snapshot()
	return out, nil
}

// takeHint says how the caller could get the input.
func (h *Hub) takeHint(caller *termdv1.Principal) string {
	if domain.IsOperator(caller) || domain.PrincipalKey(caller) == domain.PrincipalKey(h.x.Requester) {
		return fmt.Sprintf("take it over first (`termctl attach --take %s`)", h.x.ID)
	}
	return "only its requester or an operator may take it over"
}

// TakeInput makes the caller the terminal's input holder: an operator
// always, the requester unless an operator holds it.
func (t *Terminals) TakeInput(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	h, _, err := t.running(caller, id)
	if err != nil {
		return nil, err
	}
	if err := h.take(caller); err != nil {
		return nil, err
	}
	return h.snapshot(), nil
}

func (h *Hub) take(caller *termdv1.Principal) error {
	req := h.x.Requester
	from, handed, err := h.handInput(caller, func(cur *termdv1.Principal) error {
		switch {
		case domain.IsOperator(caller):
		case domain.PrincipalKey(caller) == domain.PrincipalKey(req) && !domain.IsOperator(cur):
		case domain.PrincipalKey(caller) == domain.PrincipalKey(req):
			return errdefs.Permission("the input of execution %s is held by the operator %s; an agent or requester cannot take it from an operator", h.x.ID, cur.GetName())
		default:
			return errdefs.Permission("execution %s was requested by %s; only its requester or an operator may take its input", h.x.ID, req.GetName())
		}
		return nil
	})
	if handed {
		h.record(caller, "input_taken", "from "+from.GetName(), "", nil)
	}
	return err
}

// handInput makes to the input holder when may, given the holder now (cur),
// allows it: it returns cur and whether the input changed hands (not when
// to holds it already).
func (h *Hub) handInput(to *termdv1.Principal, may func(cur *termdv1.Principal) error) (cur *termdv1.Principal, handed bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur = h.holder
	if domain.PrincipalKey(cur) == domain.PrincipalKey(to) {
		return cur, false, nil
	}
	if err := may(cur); err != nil {
		return cur, false, err
	}
	h.holder = proto.Clone(to).(*termdv1.Principal)
	return cur, true, nil
}

// ReleaseInput hands a terminal's input back to its requester: called by
// the holder who took it (or an operator), so the agent that started the
// program can type again. Nothing changes when the requester holds it.
func (t *Terminals) ReleaseInput(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	h, _, err := t.running(caller, id)
	if err != nil {
		return nil, err
	}
	req := h.x.Requester
	_, handed, err := h.handInput(req, func(cur *termdv1.Principal) error {
		if domain.PrincipalKey(cur) != domain.PrincipalKey(caller) && !domain.IsOperator(caller) {
			return errdefs.Permission("the input of execution %s is held by %s; only its holder or an operator may hand it back to %s", h.x.ID, cur.GetName(), req.GetName())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if handed {
		h.record(caller, "input_released", "to "+req.GetName(), "", nil)
	}
	return h.snapshot(), nil
}

// ResizeTerminal sets the terminal's size (the input holder or an operator).
func (t *Terminals) ResizeTerminal(_ context.Context, caller *termdv1.Principal, id string, size *termdv1.TerminalOptions) (*termdv1.Execution, error) {
	if size.GetRows() == 0 || size.GetCols() == 0 || size.GetRows() > policy.MaxTerminalSide || size.GetCols() > policy.MaxTerminalSide {
		return nil, errdefs.Invalid("terminal size %dx%d: rows and cols must be 1 to %d", size.GetRows(), size.GetCols(), policy.MaxTerminalSide)
	}
	h, proc, err := t.running(caller, id)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if !domain.IsOperator(caller) && domain.PrincipalKey(h.holder) != domain.PrincipalKey(caller) {
		holder := h.holder.GetName()
		h.mu.Unlock()
		return nil, errdefs.Permission("the input of execution %s is held by %s, who sets its size; %s", h.x.ID, holder, h.takeHint(caller))
	}
	rows, cols := uint16(size.GetRows()), uint16(size.GetCols())
	changed := rows != h.rows || cols != h.cols
	h.rows, h.cols = rows, cols
	h.screen.Resize(int(rows), int(cols))
	h.mu.Unlock()
	if changed {
		if err := proc.ResizeTerminal(rows, cols); err != nil {
			return nil, errdefs.Precondition("execution %s: resizing its terminal failed (%v)", h.x.ID, err)
		}
		h.record(caller, "resize", fmt.Sprintf("%dx%d", rows, cols), "", &termdv1.TerminalOptions{Rows: uint32(rows), Cols: uint32(cols)})
	}
	return h.snapshot(), nil
}

// GetScreen returns the rendered screen and, on request, scrollback lines.
func (t *Terminals) GetScreen(_ context.Context, caller *termdv1.Principal, r *termdv1.GetScreenRequest) (*termdv1.GetScreenResponse, error) {
	if r.GetScrollbackLines() > 10000 {
		return nil, errdefs.Invalid("scrollback_lines %d: at most 10000", r.GetScrollbackLines())
	}
	h, err := t.find(caller, r.GetExecutionId())
	if err != nil {
		return nil, err
	}
	out := &termdv1.GetScreenResponse{Screen: h.screenProto(), Execution: h.snapshot()}
	_, total := h.screen.Scrollback(0, 1)
	out.ScrollbackTotal = uint32(total)
	if n := int(r.GetScrollbackLines()); n > 0 {
		lines, _ := h.screen.Scrollback(max(total-n, 0), n)
		out.Scrollback = h.x.Redactor.RedactAll(lines)
	}
	return out, nil
}
