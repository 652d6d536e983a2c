package terminals

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/internal/vt"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

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

// Exec is what a hub knows of its execution. The fields are fixed when the
// hub is made (the redactor is the execution's: termd's plus the values of
// the credentials it received).
type Exec struct {
	ID, PlanID, SessionID string
	Requester             *termdv1.Principal
	Redactor              *receiptstore.Redactor
	// Snapshot is a copy of the execution's status (without its terminal's
	// fields, which the hub fills) and whether it has finished.
	Snapshot func() (*termdv1.Execution, bool)
}

// A Hub is the terminal of one PTY execution.
type Hub struct {
	t      *Terminals
	x      Exec
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
	// sending counts inputs being written and recorded: End waits for
	// them, so an input the program got (a ^D it exits on) is in the
	// receipt; none starts once ended is set.
	sending sync.WaitGroup
}

// termWatcher is one attached client's output queue.
type termWatcher struct {
	ch     chan *termdv1.OutputChunk
	lagged bool
}

// NewHub makes the terminal of execution x, of the size and idle limit
// term asks for; holder holds its input first.
func (t *Terminals) NewHub(x Exec, term *policy.Terminal, holder *termdv1.Principal) *Hub {
	h := &Hub{t: t, x: x, idle: term.Idle, rows: term.Rows, cols: term.Cols, holder: holder,
		changed: make(chan struct{}), watchers: map[*termWatcher]struct{}{}}
	// A program that asks the terminal where its cursor is waits for the
	// answer: the emulator's replies go back to the program.
	h.screen = vt.New(int(term.Rows), int(term.Cols), vt.Options{Reply: func(p []byte) {
		if proc := h.proc.Load(); proc != nil {
			_ = proc.WriteTerminal(p)
		}
	}})
	return h
}

// SetProcess gives the hub the running program (its input goes there).
func (h *Hub) SetProcess(proc *runner.Process) { h.proc.Store(proc) }

// Idle is the terminal's idle limit (0: none).
func (h *Hub) Idle() time.Duration { return h.idle }

// Feed renders output and passes it to attached clients; called from the
// runner's output reader, in order.
func (h *Hub) Feed(off int64, chunk []byte) {
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
	c := &termdv1.OutputChunk{ExecutionId: h.x.ID, Stream: termdv1.OutputStream_OUTPUT_STREAM_STDOUT, Offset: off, Data: []byte(h.x.Redactor.Redact(string(chunk)))}
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

// End lets go of the program and closes the attached clients' queues once
// all output is rendered.
func (h *Hub) End() {
	h.proc.Store(nil)
	h.mu.Lock()
	h.ended = true
	for w := range h.watchers {
		close(w.ch)
		delete(h.watchers, w)
	}
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	h.sending.Wait()
}

// Text is the screen's text (unredacted: for matching, not for showing).
func (h *Hub) Text() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.screen.Snapshot().Text()
}

// Changed is closed at the hub's next change: output rendered, or its end.
func (h *Hub) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// since is the raw output from off (at most what the tail holds) and the
// current offset; called with h.mu.
func (h *Hub) sinceLocked(off int64) []byte {
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
func (h *Hub) screenProto() *termdv1.Screen {
	h.mu.Lock()
	snap := h.screen.Snapshot()
	off := h.offset
	h.mu.Unlock()
	return h.screenOf(snap, off)
}

// screenOf is a screen snapshot taken at output offset off, redacted.
func (h *Hub) screenOf(snap vt.Snapshot, off int64) *termdv1.Screen {
	red := h.x.Redactor
	return &termdv1.Screen{
		Rows: uint32(snap.Rows), Cols: uint32(snap.Cols),
		Lines:         red.RedactAll(snap.Lines),
		CursorRow:     uint32(snap.CursorRow),
		CursorCol:     uint32(snap.CursorCol),
		Alternate:     snap.AltScreen,
		Title:         red.Redact(snap.Title),
		OutputOffset:  off,
		CursorVisible: snap.CursorVisible,
	}
}

// record adds one entry to the receipt's list and publishes it as a
// TERMINAL event. text must already be redacted.
func (h *Hub) record(by *termdv1.Principal, kind, text, digest string, size *termdv1.TerminalOptions) {
	now := h.t.host.Now()
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

func (h *Hub) publish(te *termdv1.TerminalEvent) {
	te.ExecutionId = h.x.ID
	h.t.host.Bus().Publish(h.x.SessionID, termdv1.EventKind_EVENT_KIND_TERMINAL, func(ev *termdv1.Event) {
		ev.Payload = &termdv1.Event_Terminal{Terminal: te}
	})
}

// Receipt is the receipt's record of the terminal.
func (h *Hub) Receipt() *receipt.Terminal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &receipt.Terminal{Rows: int(h.rows), Cols: int(h.cols), IdleTimeoutMs: h.idle.Milliseconds(),
		Inputs: append([]receipt.TerminalInput{}, h.inputs...), InputsDropped: h.dropped}
}

// Fill sets an execution's terminal fields from the hub (nil: none).
func (h *Hub) Fill(out *termdv1.Execution) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out.Tty = &termdv1.TerminalOptions{Rows: uint32(h.rows), Cols: uint32(h.cols), IdleTimeoutSeconds: uint32(h.idle / time.Second)}
	out.InputHolder = h.holder.GetName()
	out.Attached = int32(len(h.watchers))
}

// snapshot is the execution with its terminal's current state.
func (h *Hub) snapshot() *termdv1.Execution {
	out, _ := h.x.Snapshot()
	h.Fill(out)
	return out
}

// TermName is the TERM a command gets: a terminal understands xterm's
// sequences (the screen is rendered from them); without one, "dumb".
func TermName(t *policy.Terminal) string {
	if t != nil {
		return "xterm-256color"
	}
	return "dumb"
}
