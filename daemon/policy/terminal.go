package policy

import (
	"fmt"
	"time"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/verdict"
)

// Terminal defaults and bounds.
const (
	DefaultTerminalRows = 24
	DefaultTerminalCols = 80
	MaxTerminalSide     = 1000
	DefaultTerminalIdle = 10 * time.Minute
)

// terminalFor defaults a requested terminal and checks its bounds: the idle
// limit is at most the command's timeout.
func (p *Policy) terminalFor(t *decision.Terminal, timeout time.Duration, s *state) *decision.Terminal {
	if t == nil {
		return nil
	}
	out := *t
	if out.Rows == 0 {
		out.Rows = DefaultTerminalRows
	}
	if out.Cols == 0 {
		out.Cols = DefaultTerminalCols
	}
	if out.Rows > MaxTerminalSide || out.Cols > MaxTerminalSide {
		s.deny(verdict.RiskLow, fmt.Sprintf("terminal size %dx%d is too large: at most %d rows and columns", out.Rows, out.Cols, MaxTerminalSide))
	}
	switch {
	case out.Idle < 0:
		s.deny(verdict.RiskLow, "terminal idle timeout must not be negative")
	case out.Idle == 0:
		out.Idle = min(DefaultTerminalIdle, timeout)
	case out.Idle > timeout && timeout > 0:
		out.Idle = timeout
	}
	s.step("tty", fmt.Sprintf("%dx%d", out.Rows, out.Cols), "idle "+out.Idle.String())
	return &out
}

// replOptions are the options an interpreter may get and still be started
// as a REPL (no script, no -c/-e/-m operand).
var replOptions = grammar.Set("-i -q -u -B -I -E -s --interactive --quiet --simple-prompt --noreadline")

// replArgs: the arguments start an interpreter's REPL.
func replArgs(args []string) bool {
	for _, a := range args {
		if !replOptions[a] {
			return false
		}
	}
	return true
}

// replPrograms are programs whose typed input is code but which are not
// escape-class interpreters (their own grammar or rules decide them).
var replPrograms = grammar.Set("psql sqlite3 mysql mariadb redis-cli mongosh")

// terminal: what a terminal adds to the decision. Typed input is not
// checked by the policy, so only programs whose grammar marks them
// interactive-safe run on one as they would without it; a REPL asks because
// what is typed into it is code; any other program asks.
func (c *command) terminal() bool {
	if c.req.TTY == nil {
		return true
	}
	s, d := c.s, c.d
	switch {
	case c.repl || replPrograms[c.base]:
		s.raise(verdict.Ask, verdict.RiskHigh, "typed input is code: "+c.base+" on a terminal runs whatever is typed into it (approve the session, not one command)")
		s.step("terminal", "repl", c.base)
	case c.pc != nil && c.pc.Spec != nil && c.pc.Spec.Interactive:
		s.step("terminal", "interactive-safe", c.pc.CmdName())
	default:
		s.raise(verdict.Ask, verdict.MaxRisk(d.Risk, verdict.RiskMedium), c.base+" is not marked interactive-safe by the policy: on a terminal, what is typed into it is not checked")
		s.step("terminal", "not interactive-safe", c.base)
	}
	return true
}
