package mcpbridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Terminals (docs/TERMINALS.md): a plan with tty runs on a pseudo-terminal;
// terminal_send types into it and waits until the program is ready again,
// terminal_screen reads the rendered screen. What is typed into an
// interpreter is code: the policy asks a person before a REPL runs.

// TTYInput asks for a pseudo-terminal.
type TTYInput struct {
	Rows               int `json:"rows,omitempty" jsonschema:"terminal rows (default 24)"`
	Cols               int `json:"cols,omitempty" jsonschema:"terminal columns (default 80)"`
	IdleTimeoutSeconds int `json:"idle_timeout_seconds,omitempty" jsonschema:"end the program after this long without input or output (default: the daemon's, 600)"`
}

// SendInput types into a PTY execution.
type SendInput struct {
	ExecutionInput
	Text      string   `json:"text,omitempty" jsonschema:"typed as is, without Enter (e.g. y to answer a single-key prompt)"`
	Line      string   `json:"line,omitempty" jsonschema:"typed, then Enter: one line (a REPL statement, an answer); for multi-line Python blocks end with an empty line"`
	Keys      []string `json:"keys,omitempty" jsonschema:"named keys pressed after text and line, in order: enter, tab, backspace, escape, up, down, left, right, home, end, page_up, page_down, ctrl_c (SIGINT to the foreground program), ctrl_d (end of input), ctrl_z"`
	NoWait    bool     `json:"no_wait,omitempty" jsonschema:"return at once instead of waiting until the program is ready for input again"`
	TimeoutMs int      `json:"timeout_ms,omitempty" jsonschema:"wait at most this long (default 10000, max 300000); the answer then says timeout"`
	QuietMs   int      `json:"quiet_ms,omitempty" jsonschema:"also ready once the program has printed nothing for this long (for programs that never read the terminal while busy)"`
	Pattern   string   `json:"pattern,omitempty" jsonschema:"also ready once the screen text matches this regular expression (RE2), e.g. a prompt"`
}

// ScreenInput reads a PTY execution's screen.
type ScreenInput struct {
	ExecutionInput
	ScrollbackLines int `json:"scrollback_lines,omitempty" jsonschema:"also return up to this many lines that scrolled off the top (max 10000)"`
}

// TerminalView is a terminal as an agent reads it: plain text, no escape codes.
type TerminalView struct {
	ExecutionID     string   `json:"execution_id"`
	State           string   `json:"state" jsonschema:"running, or the final state once the program has ended"`
	Done            bool     `json:"done"`
	ExitCode        *int32   `json:"exit_code" jsonschema:"null while it runs"`
	Ready           string   `json:"ready,omitempty" jsonschema:"why the wait returned: waiting_for_input (the program reads the terminal: type the next input), quiet, pattern, exited or timeout (still busy: read the screen again later)"`
	Screen          string   `json:"screen" jsonschema:"the rendered screen, one line per row, trailing blanks trimmed, blank rows at the bottom left out"`
	CursorRow       int      `json:"cursor_row" jsonschema:"0-based"`
	CursorCol       int      `json:"cursor_col"`
	Rows            int      `json:"rows"`
	Cols            int      `json:"cols"`
	Output          string   `json:"output,omitempty" jsonschema:"what the program printed after this input, escape sequences removed (redacted)"`
	OutputOffset    int64    `json:"output_offset,omitempty" jsonschema:"raw output offset reached; terminal_output pages the raw bytes"`
	Scrollback      []string `json:"scrollback,omitempty"`
	ScrollbackTotal int      `json:"scrollback_total,omitempty"`
	InputHolder     string   `json:"input_holder,omitempty" jsonschema:"who may type now (the requester, or an operator who took over)"`
	ReceiptID       string   `json:"receipt_id,omitempty"`
	NextStep        string   `json:"next_step"`
}

func (b *Bridge) addTerminalTools() {
	addTool(b.server, &mcp.Tool{
		Name:  "terminal_send",
		Title: "Type into a terminal",
		Description: "Type into a PTY execution (a plan made with tty) and wait until the program is ready for more: returns why it returned (waiting_for_input, quiet, pattern, exited, timeout), the rendered screen as plain text and the new output. " +
			"Input is delivered as keystrokes in this order: text (as is), line (then Enter), keys (named keys such as ctrl_c). What you type into an interpreter runs as code. " +
			"REPLs keep state: a multi-line block needs its closing empty line, and the screen shows the prompt (>>> or ...) the program is at.",
		Annotations: &mcp.ToolAnnotations{Title: "Type into a terminal", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, b.send)
	addTool(b.server, &mcp.Tool{
		Name:        "terminal_screen",
		Title:       "Read a terminal's screen",
		Description: "The rendered screen of a PTY execution as plain text (cursor position, size, who holds the input), and optionally lines that scrolled off the top. Reading never types anything.",
		Annotations: &mcp.ToolAnnotations{Title: "Read a terminal's screen", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.screen)
}

// ttyOptions checks a plan's tty input.
func ttyOptions(in *TTYInput) (*termdv1.TerminalOptions, error) {
	if in == nil {
		return nil, nil
	}
	if in.Rows < 0 || in.Cols < 0 || in.IdleTimeoutSeconds < 0 || in.Rows > 500 || in.Cols > 500 {
		return nil, fmt.Errorf("tty {rows: %d, cols: %d, idle_timeout_seconds: %d} is out of range. Next: rows and cols from 1 to 500 (or omit them for 24x80), a positive idle timeout or none", in.Rows, in.Cols, in.IdleTimeoutSeconds)
	}
	return &termdv1.TerminalOptions{Rows: uint32(in.Rows), Cols: uint32(in.Cols), IdleTimeoutSeconds: uint32(in.IdleTimeoutSeconds)}, nil
}

func (b *Bridge) send(ctx context.Context, req *mcp.CallToolRequest, in SendInput) (*mcp.CallToolResult, *TerminalView, error) {
	id, err := b.executionID(ctx, in.ExecutionInput)
	if err != nil {
		return nil, nil, err
	}
	var inputs []*termdv1.TerminalInput
	if in.Text != "" {
		inputs = append(inputs, &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Text{Text: in.Text}})
	}
	if in.Line != "" {
		inputs = append(inputs, &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Line{Line: in.Line}})
	}
	for _, k := range in.Keys {
		key, err := client.ParseKey(k)
		if err != nil {
			return nil, nil, fmt.Errorf("%v. Next: type text with text or line", err)
		}
		inputs = append(inputs, &termdv1.TerminalInput{Input: &termdv1.TerminalInput_Key{Key: key}})
	}
	if len(inputs) == 0 && in.NoWait {
		return nil, nil, errors.New("nothing to send. Next: give text, line or keys (or omit no_wait to wait for the program without typing)")
	}
	if in.TimeoutMs < 0 || in.QuietMs < 0 || in.TimeoutMs > 300000 {
		return nil, nil, errors.New("timeout_ms must be from 0 to 300000 and quiet_ms not negative")
	}
	r := &termdv1.SendInputRequest{ExecutionId: id, Inputs: inputs}
	if !in.NoWait {
		r.Wait = &termdv1.WaitSpec{Wait: true, TimeoutMs: uint32(in.TimeoutMs), QuietMs: uint32(in.QuietMs), Pattern: in.Pattern}
	}
	resp, err := b.c.SendInput(ctx, r)
	if err != nil {
		next := ""
		if client.Code(err) == codes.PermissionDenied {
			next = "someone else holds this terminal's input (an operator took over); read it with terminal_screen, or ask the user to hand it back"
		}
		return nil, nil, failure(err, next)
	}
	v := terminalView(resp.GetExecution(), resp.GetScreen())
	v.Ready = readyWord(resp)
	v.Output, v.OutputOffset = resp.GetOutputText(), resp.GetOutputOffset()
	switch v.Ready {
	case "timeout":
		v.NextStep = "the program is still busy: call terminal_screen (or terminal_send with no input) later; keys [\"ctrl_c\"] interrupts it"
	case "":
		v.NextStep = "sent without waiting: terminal_screen shows what it did"
	}
	return b.terminalReply(v)
}

func (b *Bridge) screen(ctx context.Context, req *mcp.CallToolRequest, in ScreenInput) (*mcp.CallToolResult, *TerminalView, error) {
	id, err := b.executionID(ctx, in.ExecutionInput)
	if err != nil {
		return nil, nil, err
	}
	if in.ScrollbackLines < 0 || in.ScrollbackLines > 10000 {
		return nil, nil, errors.New("scrollback_lines must be from 0 to 10000")
	}
	resp, err := b.c.Terminals.GetScreen(ctx, &termdv1.GetScreenRequest{ExecutionId: id, ScrollbackLines: uint32(in.ScrollbackLines)})
	if err != nil {
		return nil, nil, failure(err, "")
	}
	v := terminalView(resp.GetExecution(), resp.GetScreen())
	v.Scrollback, v.ScrollbackTotal = resp.GetScrollback(), int(resp.GetScrollbackTotal())
	return b.terminalReply(v)
}

// readyWord is why a wait returned, as the agent reads it: "" when the
// daemon did not wait (or says nothing), never "unspecified".
func readyWord(resp *termdv1.SendInputResponse) string {
	if w := enumWord(resp.GetReady().String(), "READY_REASON_"); w != "unspecified" {
		return w
	}
	return ""
}

func terminalView(e *termdv1.Execution, sc *termdv1.Screen) *TerminalView {
	ev := executionView(e)
	v := &TerminalView{
		ExecutionID: e.GetId(),
		State:       ev.State,
		Done:        ev.Done,
		ExitCode:    ev.ExitCode,
		Screen:      client.ScreenText(sc),
		CursorRow:   int(sc.GetCursorRow()),
		CursorCol:   int(sc.GetCursorCol()),
		Rows:        int(sc.GetRows()),
		Cols:        int(sc.GetCols()),
		InputHolder: e.GetInputHolder(),
		ReceiptID:   e.GetReceiptId(),
	}
	if v.Done {
		v.NextStep = "the program has ended; its receipt (terminal_receipt) lists every input"
	} else {
		v.NextStep = fmt.Sprintf("type the next input with terminal_send (execution_id %q); keys [\"ctrl_d\"] or the program's own exit command ends it, terminal_cancel stops it", e.GetId())
	}
	return v
}

func (b *Bridge) terminalReply(v *TerminalView) (*mcp.CallToolResult, *TerminalView, error) {
	summary := fmt.Sprintf("execution %s: %s", v.ExecutionID, v.State)
	if v.Ready != "" {
		summary += ", ready: " + v.Ready
	}
	summary += ". Next: " + v.NextStep
	if v.Output != "" {
		summary += "\n--- output ---\n" + v.Output
	}
	summary += fmt.Sprintf("\n--- screen (%dx%d, cursor at row %d, col %d) ---\n%s", v.Rows, v.Cols, v.CursorRow, v.CursorCol, v.Screen)
	return reply(v, false, summary, "screen", "output")
}

// startTerminal answers terminal_execute for a PTY plan once it has
// started: it waits (as terminal_send without input) until the program is
// ready for its first input, and shows the screen.
func (b *Bridge) startTerminal(ctx context.Context, e *termdv1.Execution, wait int) (*mcp.CallToolResult, *ExecutionView, error) {
	timeout := uint32(10000)
	if wait > 0 {
		timeout = uint32(min(wait, 300) * 1000)
	}
	resp, err := b.c.SendInput(ctx, &termdv1.SendInputRequest{ExecutionId: e.GetId(), Wait: &termdv1.WaitSpec{Wait: true, TimeoutMs: timeout}})
	if err != nil {
		return nil, nil, failure(err, fmt.Sprintf("read its screen with terminal_screen (execution_id %q)", e.GetId()))
	}
	ex := resp.GetExecution()
	t := terminalView(ex, resp.GetScreen())
	t.Ready = readyWord(resp)
	t.Output, t.OutputOffset = resp.GetOutputText(), resp.GetOutputOffset()
	v := executionView(ex)
	v.Terminal, v.NextStep = t, t.NextStep
	v.ResourceURI = executionURI(v.ExecutionID)
	summary := fmt.Sprintf("execution %s: %s on a terminal", v.ExecutionID, v.State)
	if t.Ready != "" {
		summary += ", ready: " + t.Ready
	}
	summary += fmt.Sprintf(". Next: %s\n--- screen ---\n%s", v.NextStep, t.Screen)
	return reply(v, false, summary)
}
