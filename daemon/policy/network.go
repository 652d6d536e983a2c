package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/netmode"
)

// checkNetwork refuses a network the caller asked for that is not a mode, or
// an egress allow-list the configuration does not name.
func checkNetwork(asked string, ctx *toolspec.DecideCtx, s *state) {
	_, name, err := netmode.Parse(asked)
	if err != nil {
		s.deny(verdict.RiskLow, err.Error())
		return
	}
	if name != "" && ctx.EgressLists != nil && !slices.Contains(ctx.EgressLists, name) {
		known := "none is configured"
		if len(ctx.EgressLists) > 0 {
			known = "configured: " + strings.Join(ctx.EgressLists, ", ")
		}
		s.deny(verdict.RiskLow, fmt.Sprintf("network %q names no egress allow-list (%s); add it to termd's config or ask for another network", asked, known))
	}
}

// networkFor decides the network of a command from what it asked for and
// whether its program needs the network (pc.net), and sets pc.net to what
// the rest of the decision must weigh: a network that reaches nothing
// outside (none, the workspace loopback) costs no approval, so a program
// that wants the network but is held to one counts as offline; host (and an
// egress allow-list) counts as network use, asked in confirm mode.
//
//	asked ""                   -> host when the program needs the network, else workspace-loopback
//	                              (a client whose every URL is loopback: workspace-loopback, offline,
//	                              when the sandbox is fully enforced)
//	asked none / loopback      -> that, offline
//	asked host / egress:NAME   -> that, network use
//
// The loopback client's inference rests on enforcement: on the workspace
// loopback it reaches the principal's own namespace or, where termd cannot
// make one, nothing (Landlock refuses TCP); without a fully enforced sandbox
// that fallback is not certain, and 127.0.0.1 could be the host's own.
func networkFor(asked string, pc *grammar.Parsed, enforced bool, s *state) netmode.Mode {
	m, _, err := netmode.Parse(asked)
	if err != nil {
		return netmode.None // denied in checkNetwork; the strictest mode for the record
	}
	switch {
	case m == "" && pc.Net && pc.Loopback && enforced:
		m = netmode.WorkspaceLoopback
		s.step("network", string(m), pc.CmdName()+" reaches only loopback addresses: it gets the workspace loopback (the principal's dev servers, nothing outside)")
		pc.Net = false
	case m == "" && pc.Net:
		m = netmode.Host
		if pc.Loopback {
			s.step("network", string(m), pc.CmdName()+" reaches only loopback addresses, but without a fully enforced sandbox the workspace loopback is not certain to hold it: it gets host")
		}
	case m == "":
		m = netmode.WorkspaceLoopback
	case m.Contained():
		if pc.Net {
			s.step("network", string(m), pc.CmdName()+" would use the network; it gets "+string(m)+" and reaches nothing outside")
		}
		pc.Net = false
	default: // host, egress:NAME
		pc.Net = true
	}
	return m
}
