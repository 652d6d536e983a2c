package policy

import (
	"strings"
)

// Tool grammars. The grammar says how argv is read (which options exist,
// which take values, which operands are paths) and which options are
// hidden execution; whether a command is allowed, asked or denied, and at
// which risk, is data in the policy file (rules).

func opts(groups ...[]*opt) []*opt {
	var out []*opt
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func list(os ...*opt) []*opt { return os }

func sub(name string, c *cmdSpec) *cmdSpec { c.name = name; return c }

func subs(cs ...*cmdSpec) map[string]*cmdSpec {
	m := map[string]*cmdSpec{}
	for _, c := range cs {
		m[c.name] = c
	}
	return m
}

const (
	whyExec      = "runs a command (hidden execution)"
	whyPager     = "runs a pager program"
	whyConfig    = "sets configuration that can run programs"
	whyUnchecked = "reads a program text that cannot be checked"
)

func baseName(s string) string {
	s = strings.TrimRight(s, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "."
	}
	return s
}
