package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/internal/vt"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// A terminal hub is the broker's side of one PTY execution
// (docs/TERMINALS.md): the screen rendered from its output, the clients
// attached to it, who holds its input, and every input, which becomes a
// TERMINAL event and part of the receipt.

// Bounds of one terminal.
const (
	// termTailBytes is the recent raw output a hub keeps for re-attaching
	// clients and for the output a send produced.
	termTailBytes = 256 << 10
	// maxInputBytes bounds one SendInput.
	maxInputBytes = 64 << 10
	// maxReceiptInputs bounds the inputs listed in a receipt (more are counted).
	maxReceiptInputs = 10000
	// maxInputText bounds the recorded text of one input.
	maxInputText = 4 << 10
	// maxOutputText bounds SendInputResponse.output_text (its last bytes).
	maxOutputText = 64 << 10
	// watcherBuffer is how many output pieces an attached client may be behind.
	watcherBuffer = 1024
)

type termHub struct {
	b      *Broker
	e      *execRec
	screen *vt.Terminal
	proc   atomic.Pointer[runner.Process]
	idle   time.Duration

	mu         sync.Mutex
	offset     int64  // raw output bytes rendered
	seq        uint64 // output pieces rendered (the readiness probe's output counter)
	tail       []byte // the last termTailBytes of raw output, ending at offset
	changed    chan struct{}
	watchers   map[*termWatcher]struct{}
	holder     *termdv1.Principal
	rows, cols uint16
	inputs     []receipt.TerminalInput
	dropped    int64
	nextSeq    int64
	ended      bool
}

// termWatcher is one attached client's output queue.
type termWatcher struct {
	ch     chan *termdv1.OutputChunk
	lagged bool
}

func newTermHub(b *Broker, e *execRec, t *policy.Terminal, holder *termdv1.Principal) *termHub {
	h := &termHub{b: b, e: e, idle: t.Idle, rows: t.Rows, cols: t.Cols, holder: holder,
		changed: make(chan struct{}), watchers: map[*termWatcher]struct{}{}}
	// A program that asks the terminal where its cursor is waits for the
	// answer: the emulator's replies go back to the program.
	h.screen = vt.New(int(t.Rows), int(t.Cols), vt.Options{Reply: func(p []byte) {
		if proc := h.proc.Load(); proc != nil {
			_ = proc.WriteTerminal(p)
		}
	}})
	return h
}

// feed renders output and passes it to attached clients; called from the
// runner's output reader, in order.
func (h *termHub) feed(off int64, chunk []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, _ = h.screen.Write(chunk)
	h.offset = off + int64(len(chunk))
	h.seq++
	h.tail = append(h.tail, chunk...)
	if over := len(h.tail) - termTailBytes; over > 0 {
		h.tail = append(h.tail[:0], h.tail[over:]...)
	}
	close(h.changed)
	h.changed = make(chan struct{})
	if len(h.watchers) == 0 {
		return
	}
	c := &termdv1.OutputChunk{ExecutionId: h.e.id, Stream: termdv1.OutputStream_OUTPUT_STREAM_STDOUT, Offset: off, Data: []byte(h.e.redactor.Redact(string(chunk)))}
	for w := range h.watchers {
		select {
		case w.ch <- c:
		default:
			// A client that cannot keep up is let go, never waited for.
			w.lagged = true
			close(w.ch)
			delete(h.watchers, w)
		}
	}
}

// end closes the attached clients' queues once all output is rendered.
func (h *termHub) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = true
	for w := range h.watchers {
		close(w.ch)
		delete(h.watchers, w)
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// since is the raw output from off (at most what the tail holds) and the
// current offset; called with h.mu.
func (h *termHub) sinceLocked(off int64) []byte {
	start := h.offset - int64(len(h.tail))
	if off < start {
		off = start
	}
	if off >= h.offset {
		return nil
	}
	return append([]byte(nil), h.tail[off-start:]...)
}

// screenProto is the rendered screen, each line redacted.
func (h *termHub) screenProto() *termdv1.Screen {
	h.mu.Lock()
	snap := h.screen.Snapshot()
	off := h.offset
	h.mu.Unlock()
	return &termdv1.Screen{
		Rows: uint32(snap.Rows), Cols: uint32(snap.Cols),
		Lines:         h.e.redactor.RedactAll(snap.Lines),
		CursorRow:     uint32(snap.CursorRow),
		CursorCol:     uint32(snap.CursorCol),
		Alternate:     snap.AltScreen,
		Title:         h.e.redactor.Redact(snap.Title),
		OutputOffset:  off,
		CursorVisible: snap.CursorVisible,
	}
}

// record adds one entry to the receipt's list and publishes it as a
// TERMINAL event. text must already be redacted.
func (h *termHub) record(by *termdv1.Principal, kind, text, digest string, size *termdv1.TerminalOptions) {
	now := h.b.Now()
	h.mu.Lock()
	h.nextSeq++
	if len(h.inputs) < maxReceiptInputs {
		h.inputs = append(h.inputs, receipt.TerminalInput{Seq: h.nextSeq, At: now, By: by.GetName(), Kind: kind, Text: text, SHA256: digest})
	} else {
		h.dropped++
	}
	h.mu.Unlock()
	te := &termdv1.TerminalEvent{Kind: kind, By: by.GetName(), Text: text, Sha256: digest, Size: size}
	if kind == "input_taken" || kind == "input_released" {
		h.mu.Lock()
		te.Holder = h.holder.GetName()
		h.mu.Unlock()
	}
	h.publish(te)
}

func (h *termHub) publish(te *termdv1.TerminalEvent) {
	te.ExecutionId = h.e.id
	h.b.Bus.Publish(h.e.plan.session.id, termdv1.EventKind_EVENT_KIND_TERMINAL, func(ev *termdv1.Event) {
		ev.Payload = &termdv1.Event_Terminal{Terminal: te}
	})
}

// receiptTerminal is the receipt's record of the terminal.
func (h *termHub) receiptTerminal() *receipt.Terminal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &receipt.Terminal{Rows: int(h.rows), Cols: int(h.cols), IdleTimeoutMs: h.idle.Milliseconds(),
		Inputs: append([]receipt.TerminalInput{}, h.inputs...), InputsDropped: h.dropped}
}

// terminalRequest is the policy's form of a requested terminal.
func terminalRequest(t *termdv1.TerminalOptions) *policy.Terminal {
	if t == nil {
		return nil
	}
	return &policy.Terminal{Rows: clampSide(t.Rows), Cols: clampSide(t.Cols), Idle: time.Duration(t.IdleTimeoutSeconds) * time.Second}
}

// clampSide keeps a side in uint16 (the policy refuses what is too large).
func clampSide(n uint32) uint16 { return uint16(min(n, 65535)) }

func terminalProto(t *policy.Terminal) *termdv1.TerminalOptions {
	if t == nil {
		return nil
	}
	return &termdv1.TerminalOptions{Rows: uint32(t.Rows), Cols: uint32(t.Cols), IdleTimeoutSeconds: uint32(t.Idle / time.Second)}
}

// keyBytes are the bytes a named key sends (xterm, normal cursor mode).
var keyBytes = map[termdv1.TerminalKey]string{
	termdv1.TerminalKey_TERMINAL_KEY_ENTER:     "\r",
	termdv1.TerminalKey_TERMINAL_KEY_TAB:       "\t",
	termdv1.TerminalKey_TERMINAL_KEY_BACKSPACE: "\x7f",
	termdv1.TerminalKey_TERMINAL_KEY_ESCAPE:    "\x1b",
	termdv1.TerminalKey_TERMINAL_KEY_UP:        "\x1b[A",
	termdv1.TerminalKey_TERMINAL_KEY_DOWN:      "\x1b[B",
	termdv1.TerminalKey_TERMINAL_KEY_RIGHT:     "\x1b[C",
	termdv1.TerminalKey_TERMINAL_KEY_LEFT:      "\x1b[D",
	termdv1.TerminalKey_TERMINAL_KEY_HOME:      "\x1b[H",
	termdv1.TerminalKey_TERMINAL_KEY_END:       "\x1b[F",
	termdv1.TerminalKey_TERMINAL_KEY_PAGE_UP:   "\x1b[5~",
	termdv1.TerminalKey_TERMINAL_KEY_PAGE_DOWN: "\x1b[6~",
	termdv1.TerminalKey_TERMINAL_KEY_CTRL_C:    "\x03",
	termdv1.TerminalKey_TERMINAL_KEY_CTRL_D:    "\x04",
	termdv1.TerminalKey_TERMINAL_KEY_CTRL_Z:    "\x1a",
}

// keyName is how a key is shown in events and receipts: <ENTER>.
func keyName(k termdv1.TerminalKey) string {
	return "<" + strings.TrimPrefix(k.String(), "TERMINAL_KEY_") + ">"
}

// byteNames show control bytes of raw input by the key that sends them.
var byteNames = func() map[byte]string {
	m := map[byte]string{}
	for k, s := range keyBytes {
		if len(s) == 1 {
			m[s[0]] = keyName(k)
		}
	}
	return m
}()

// appCursorKeys are the keys that send ESC O x instead of ESC [ x when the
// program asked for application cursor keys (DECCKM: readline, less, vim).
var appCursorKeys = map[termdv1.TerminalKey]string{
	termdv1.TerminalKey_TERMINAL_KEY_UP:    "\x1bOA",
	termdv1.TerminalKey_TERMINAL_KEY_DOWN:  "\x1bOB",
	termdv1.TerminalKey_TERMINAL_KEY_RIGHT: "\x1bOC",
	termdv1.TerminalKey_TERMINAL_KEY_LEFT:  "\x1bOD",
	termdv1.TerminalKey_TERMINAL_KEY_HOME:  "\x1bOH",
	termdv1.TerminalKey_TERMINAL_KEY_END:   "\x1bOF",
}

// encodeInputs turns inputs into the bytes written to the terminal and the
// text shown for them (unredacted); appCursor is the screen's DECCKM.
func encodeInputs(in []*termdv1.TerminalInput, appCursor bool) ([]byte, string, error) {
	if len(in) == 0 {
		return nil, "", errdefs.Invalid("no input: send text, a line, a key or data (or only wait, with wait set)")
	}
	var raw []byte
	var shown strings.Builder
	for i, x := range in {
		switch v := x.GetInput().(type) {
		case *termdv1.TerminalInput_Text:
			raw = append(raw, v.Text...)
			shown.WriteString(v.Text)
		case *termdv1.TerminalInput_Line:
			raw = append(append(raw, v.Line...), '\r')
			shown.WriteString(v.Line + keyName(termdv1.TerminalKey_TERMINAL_KEY_ENTER))
		case *termdv1.TerminalInput_Key:
			b, ok := keyBytes[v.Key]
			if alt, has := appCursorKeys[v.Key]; has && appCursor {
				b = alt
			}
			if !ok {
				return nil, "", errdefs.Invalid("input %d: key %v is not a key termd knows; use one of ENTER, TAB, BACKSPACE, ESCAPE, UP, DOWN, LEFT, RIGHT, HOME, END, PAGE_UP, PAGE_DOWN, CTRL_C, CTRL_D, CTRL_Z", i+1, v.Key)
			}
			raw = append(raw, b...)
			shown.WriteString(keyName(v.Key))
		case *termdv1.TerminalInput_Data:
			raw = append(raw, v.Data...)
			shown.WriteString(showBytes(v.Data))
		default:
			return nil, "", errdefs.Invalid("input %d is empty: set text, line, key or data", i+1)
		}
		if len(raw) > maxInputBytes {
			return nil, "", errdefs.Invalid("input of more than %d bytes in one send; send it in pieces", maxInputBytes)
		}
	}
	return raw, shown.String(), nil
}

// showBytes shows raw keystrokes as text: control bytes by key name.
func showBytes(p []byte) string {
	var b strings.Builder
	for len(p) > 0 {
		if n, ok := byteNames[p[0]]; ok {
			b.WriteString(n)
			p = p[1:]
			continue
		}
		r, size := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, "<0x%02x>", p[0])
		case r < 0x20:
			fmt.Fprintf(&b, "<CTRL_%c>", r+'@')
		default:
			b.WriteRune(r)
		}
		p = p[size:]
	}
	return b.String()
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes)", len(s))
}

// hubFor finds the terminal of an execution the caller may see.
func (b *Broker) hubFor(caller *termdv1.Principal, id string) (*termHub, *execRec, error) {
	b.mu.Lock()
	defer b.unlock()
	e, err := b.execLocked(caller, id)
	if err != nil {
		return nil, nil, err
	}
	if e.hub == nil {
		return nil, nil, errdefs.Precondition("execution %s has no terminal; plan the command with a terminal (`termctl run --tty -- …`)", id)
	}
	return e.hub, e, nil
}

// runningHub is hubFor for a terminal whose program still runs.
func (b *Broker) runningHub(caller *termdv1.Principal, id string) (*termHub, *execRec, *runner.Process, error) {
	h, e, err := b.hubFor(caller, id)
	if err != nil {
		return nil, nil, nil, err
	}
	proc := h.proc.Load()
	b.mu.Lock()
	finished, state := e.finished, e.e.State
	b.unlock()
	if finished || proc == nil {
		return nil, nil, nil, errdefs.Precondition("execution %s is %s; its terminal takes no more input", id, execWord(state))
	}
	return h, e, proc, nil
}

// executionSnapshot is an execution with its terminal's current state.
func (b *Broker) executionSnapshot(e *execRec) *termdv1.Execution {
	b.mu.Lock()
	out := proto.Clone(e.e).(*termdv1.Execution)
	b.unlock()
	e.hub.fill(out)
	return out
}

// fill sets an execution's terminal fields from the hub (nil: none).
func (h *termHub) fill(out *termdv1.Execution) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out.Tty = &termdv1.TerminalOptions{Rows: uint32(h.rows), Cols: uint32(h.cols), IdleTimeoutSeconds: uint32(h.idle / time.Second)}
	out.InputHolder = h.holder.GetName()
	out.Attached = int32(len(h.watchers))
}

// SendInput writes input to a terminal the caller holds the input of and,
// with wait, returns when the program is ready for more.
func (b *Broker) SendInput(ctx context.Context, caller *termdv1.Principal, r *termdv1.SendInputRequest) (*termdv1.SendInputResponse, error) {
	spec, err := waitSpec(r.GetWait())
	if err != nil {
		return nil, err
	}
	h, e, proc, err := b.runningHub(caller, r.GetExecutionId())
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
		return nil, errdefs.Permission("the input of execution %s is held by %s; %s", e.id, holder, takeHint(caller, e))
	}
	startOff := h.offset
	h.mu.Unlock()
	if len(raw) > 0 {
		if err := proc.WriteTerminal(raw); err != nil {
			return nil, errdefs.Precondition("execution %s: writing to its terminal failed (%v); it has probably ended", e.id, err)
		}
		sum := sha256.Sum256(raw)
		h.record(caller, "input", clipText(e.redactor.Redact(shown), maxInputText), hex.EncodeToString(sum[:]), nil)
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
	out.OutputText = e.redactor.Redact(text)
	out.Screen = h.screenProto()
	out.Execution = b.executionSnapshot(e)
	return out, nil
}

// takeHint says how the caller could get the input.
func takeHint(caller *termdv1.Principal, e *execRec) string {
	if domain.IsOperator(caller) || domain.PrincipalKey(caller) == domain.PrincipalKey(e.plan.p.Requester) {
		return fmt.Sprintf("take it over first (`termctl attach --take %s`)", e.id)
	}
	return "only its requester or an operator may take it over"
}

// TakeInput makes the caller the terminal's input holder: an operator
// always, the requester unless an operator holds it.
func (b *Broker) TakeInput(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	h, e, _, err := b.runningHub(caller, id)
	if err != nil {
		return nil, err
	}
	if err := h.take(caller); err != nil {
		return nil, err
	}
	return b.executionSnapshot(e), nil
}

func (h *termHub) take(caller *termdv1.Principal) error {
	e := h.e
	h.mu.Lock()
	cur := h.holder
	switch {
	case domain.PrincipalKey(cur) == domain.PrincipalKey(caller):
		h.mu.Unlock()
		return nil
	case domain.IsOperator(caller):
	case domain.PrincipalKey(caller) == domain.PrincipalKey(e.plan.p.Requester) && !domain.IsOperator(cur):
	case domain.PrincipalKey(caller) == domain.PrincipalKey(e.plan.p.Requester):
		h.mu.Unlock()
		return errdefs.Permission("the input of execution %s is held by the operator %s; an agent or requester cannot take it from an operator", e.id, cur.GetName())
	default:
		h.mu.Unlock()
		return errdefs.Permission("execution %s was requested by %s; only its requester or an operator may take its input", e.id, e.plan.p.Requester.GetName())
	}
	h.holder = proto.Clone(caller).(*termdv1.Principal)
	h.mu.Unlock()
	h.record(caller, "input_taken", "from "+cur.GetName(), "", nil)
	return nil
}

// ReleaseInput hands a terminal's input back to its requester: called by
// the holder who took it (or an operator), so the agent that started the
// program can type again. Nothing changes when the requester holds it.
func (b *Broker) ReleaseInput(_ context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	h, e, _, err := b.runningHub(caller, id)
	if err != nil {
		return nil, err
	}
	req := e.plan.p.Requester
	h.mu.Lock()
	cur := h.holder
	switch {
	case domain.PrincipalKey(cur) == domain.PrincipalKey(req):
		h.mu.Unlock()
		return b.executionSnapshot(e), nil
	case domain.PrincipalKey(cur) != domain.PrincipalKey(caller) && !domain.IsOperator(caller):
		h.mu.Unlock()
		return nil, errdefs.Permission("the input of execution %s is held by %s; only its holder or an operator may hand it back to %s", e.id, cur.GetName(), req.GetName())
	}
	h.holder = proto.Clone(req).(*termdv1.Principal)
	h.mu.Unlock()
	h.record(caller, "input_released", "to "+req.GetName(), "", nil)
	return b.executionSnapshot(e), nil
}

// ResizeTerminal sets the terminal's size (the input holder or an operator).
func (b *Broker) ResizeTerminal(_ context.Context, caller *termdv1.Principal, id string, size *termdv1.TerminalOptions) (*termdv1.Execution, error) {
	if size.GetRows() == 0 || size.GetCols() == 0 || size.GetRows() > policy.MaxTerminalSide || size.GetCols() > policy.MaxTerminalSide {
		return nil, errdefs.Invalid("terminal size %dx%d: rows and cols must be 1 to %d", size.GetRows(), size.GetCols(), policy.MaxTerminalSide)
	}
	h, e, proc, err := b.runningHub(caller, id)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if !domain.IsOperator(caller) && domain.PrincipalKey(h.holder) != domain.PrincipalKey(caller) {
		holder := h.holder.GetName()
		h.mu.Unlock()
		return nil, errdefs.Permission("the input of execution %s is held by %s, who sets its size; %s", e.id, holder, takeHint(caller, e))
	}
	rows, cols := uint16(size.GetRows()), uint16(size.GetCols())
	changed := rows != h.rows || cols != h.cols
	h.rows, h.cols = rows, cols
	h.screen.Resize(int(rows), int(cols))
	h.mu.Unlock()
	if changed {
		if err := proc.ResizeTerminal(rows, cols); err != nil {
			return nil, errdefs.Precondition("execution %s: resizing its terminal failed (%v)", e.id, err)
		}
		h.record(caller, "resize", fmt.Sprintf("%dx%d", rows, cols), "", &termdv1.TerminalOptions{Rows: uint32(rows), Cols: uint32(cols)})
	}
	return b.executionSnapshot(e), nil
}

// GetScreen returns the rendered screen and, on request, scrollback lines.
func (b *Broker) GetScreen(_ context.Context, caller *termdv1.Principal, r *termdv1.GetScreenRequest) (*termdv1.GetScreenResponse, error) {
	if r.GetScrollbackLines() > 10000 {
		return nil, errdefs.Invalid("scrollback_lines %d: at most 10000", r.GetScrollbackLines())
	}
	h, e, err := b.hubFor(caller, r.GetExecutionId())
	if err != nil {
		return nil, err
	}
	out := &termdv1.GetScreenResponse{Screen: h.screenProto(), Execution: b.executionSnapshot(e)}
	_, total := h.screen.Scrollback(0, 1)
	out.ScrollbackTotal = uint32(total)
	if n := int(r.GetScrollbackLines()); n > 0 {
		lines, _ := h.screen.Scrollback(max(total-n, 0), n)
		out.Scrollback = e.redactor.RedactAll(lines)
	}
	return out, nil
}

// AttachTerminal sends the screen, then output from sinceOffset (-1: from
// now) and the execution's terminal and state events, until its receipt.
// The client going away only detaches.
func (b *Broker) AttachTerminal(ctx context.Context, caller *termdv1.Principal, r *termdv1.AttachTerminalRequest, send func(*termdv1.AttachTerminalResponse) error) error {
	if r.GetSinceOffset() < -1 {
		return errdefs.Invalid("since_offset %d: use an output offset, or -1 for output from now", r.GetSinceOffset())
	}
	release, err := b.acquireStream(caller)
	if err != nil {
		return err
	}
	defer release()
	h, e, err := b.hubFor(caller, r.GetExecutionId())
	if err != nil {
		return err
	}
	if r.GetTakeInput() {
		if proc := h.proc.Load(); proc == nil {
			return errdefs.Precondition("execution %s has ended; its terminal takes no input", e.id)
		}
		if err := h.take(caller); err != nil {
			return err
		}
	}
	sid := e.plan.session.id
	sub, err := b.Bus.Subscribe(sid, b.Bus.LastSeq(sid))
	if err != nil {
		return errdefs.Internal("subscribing to session events: %v", err)
	}
	defer sub.Close()
	w := &termWatcher{ch: make(chan *termdv1.OutputChunk, watcherBuffer)}
	h.mu.Lock()
	screen := h.screen.Snapshot()
	screenOff := h.offset
	var replay []byte
	replayAt := screenOff
	if r.GetSinceOffset() >= 0 {
		replay = h.sinceLocked(r.GetSinceOffset())
		replayAt = screenOff - int64(len(replay))
	}
	ended := h.ended
	if !ended {
		h.watchers[w] = struct{}{}
	} else {
		close(w.ch)
	}
	h.mu.Unlock()
	if !ended {
		h.publish(&termdv1.TerminalEvent{Kind: "attached", By: caller.GetName()})
		defer func() {
			h.mu.Lock()
			if _, ok := h.watchers[w]; ok {
				delete(h.watchers, w)
			}
			h.mu.Unlock()
			h.publish(&termdv1.TerminalEvent{Kind: "detached", By: caller.GetName()})
		}()
	}
	sp := &termdv1.Screen{Rows: uint32(screen.Rows), Cols: uint32(screen.Cols), Lines: e.redactor.RedactAll(screen.Lines),
		CursorRow: uint32(screen.CursorRow), CursorCol: uint32(screen.CursorCol), Alternate: screen.AltScreen,
		Title: e.redactor.Redact(screen.Title), OutputOffset: screenOff, CursorVisible: screen.CursorVisible}
	if err := send(&termdv1.AttachTerminalResponse{Payload: &termdv1.AttachTerminalResponse_Screen{Screen: sp}}); err != nil {
		return err
	}
	if len(replay) > 0 {
		c := &termdv1.OutputChunk{ExecutionId: e.id, Stream: termdv1.OutputStream_OUTPUT_STREAM_STDOUT, Offset: replayAt, Data: []byte(e.redactor.Redact(string(replay)))}
		if err := send(&termdv1.AttachTerminalResponse{Payload: &termdv1.AttachTerminalResponse_Output{Output: c}}); err != nil {
			return err
		}
	}
	b.mu.Lock()
	finished, receiptID := e.finished, e.e.ReceiptId
	b.unlock()
	if finished && receiptID != "" {
		return nil // nothing more will happen on this terminal
	}
	events := make(chan *termdv1.Event)
	evErr := make(chan error, 1)
	go func() {
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				evErr <- err
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				evErr <- ctx.Err()
				return
			}
		}
	}()
	sendChunk := func(c *termdv1.OutputChunk) error {
		return send(&termdv1.AttachTerminalResponse{Payload: &termdv1.AttachTerminalResponse_Output{Output: c}})
	}
	out := w.ch
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c, ok := <-out:
			if !ok {
				h.mu.Lock()
				lagged := w.lagged
				h.mu.Unlock()
				if lagged {
					return errdefs.Exhausted("this client fell more than %d output pieces behind the terminal and was detached; attach again", watcherBuffer)
				}
				out = nil // all output is sent; the receipt follows
				continue
			}
			if err := sendChunk(c); err != nil {
				return err
			}
		case err := <-evErr:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			_ = err
			return nil // the session's events ended (closed)
		case ev := <-events:
			if !terminalEventOf(ev, e.id, e.plan.p.Id) {
				continue
			}
			last := ev.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED
			if last && out != nil {
				// Output first: the hub closed the queue before the receipt.
				for c := range out {
					if err := sendChunk(c); err != nil {
						return err
					}
				}
				out = nil
			}
			if err := send(&termdv1.AttachTerminalResponse{Payload: &termdv1.AttachTerminalResponse_Event{Event: ev}}); err != nil {
				return err
			}
			if last {
				return nil
			}
		}
	}
}

// terminalEventOf: an event an attached client of execution execID sees
// (its output comes from the hub, not from output events).
func terminalEventOf(ev *termdv1.Event, execID, planID string) bool {
	switch p := ev.Payload.(type) {
	case *termdv1.Event_Terminal:
		return p.Terminal.ExecutionId == execID
	case *termdv1.Event_Output:
		return false
	}
	return eventOf(ev, execID, planID)
}

// termName is the TERM a command gets: a terminal understands xterm's
// sequences (the screen is rendered from them); without one, "dumb".
func termName(t *policy.Terminal) string {
	if t != nil {
		return "xterm-256color"
	}
	return "dumb"
}
