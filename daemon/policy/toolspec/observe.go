package toolspec

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/program"
)

// What a decision asked the file system, for the decision cache
// (daemon/policy/cache.go). A decision is a function of its request, its
// context, the policy and the file system's answers. The engine asks the
// file system in two ways: path components through the decision's PathMemo
// (an Lstat, and a symlink's target), and the questions below, each a
// probe: a named function of its arguments and the file system, whose
// answer (a string) is everything the caller uses of it. With an Observer
// in the DecideCtx every answer is written down, so a cached decision can
// be checked by asking the same questions again: the same answers mean the
// uncached engine would decide the same.
//
// What the engine cannot write down this way (tool hooks, project entry
// files, a tool's chdir options) taints the decision: it is not cached.
// TestDecisionCacheSeesEveryFileSystemCall holds every file system call of
// the policy packages to one of the two.

// Probe names a question to the file system.
type Probe uint8

const (
	ProbeStat       Probe = iota + 1 // os.Stat: mode, or "-" when it fails
	ProbeLstat                       // os.Lstat: mode, or "-"
	ProbeHash                        // FileSHA256: the digest, or "!" and the error
	ProbeExec                        // program.Exec(a, trusted PATH b): the paths
	ProbeSetID                       // IsSetID
	ProbeHardLink                    // HardLinked(a, write=b)
	ProbePrivileged                  // PrivilegedOnly
	ProbeRecursive                   // RecursiveOutside
	ProbeEvalLinks                   // filepath.EvalSymlinks: the path, or "!"
	ProbeExists                      // Exists(a, b)
	ProbeDigest                      // an entry file's digest (ProjectFiles)
	numProbes
)

// Observation is one question and its answer.
type Observation struct {
	Probe  Probe
	A, B   string
	Answer string
}

// Observer writes down a decision's answers. Not safe for concurrent use: a
// decision runs on one goroutine.
type Observer struct {
	Obs []Observation
	// Tainted says why the decision asked the file system in a way that is
	// not written down ("" when it did not): such a decision is not cached.
	Tainted string
}

// Taint marks the decision as not cacheable, saying why. Nil-safe.
func (ctx *DecideCtx) Taint(why string) {
	if ctx != nil && ctx.Obs != nil && ctx.Obs.Tainted == "" {
		ctx.Obs.Tainted = why
	}
}

func (ctx *DecideCtx) ask(p Probe, a, b string) string {
	ans := answer(p, a, b)
	if ctx == nil || ctx.Obs == nil {
		return ans
	}
	o := ctx.Obs
	for _, x := range o.Obs {
		if x.Probe == p && x.A == a && x.B == b {
			if x.Answer != ans {
				// The file system changed during the decision: the answers
				// are not one moment's, so they cannot vouch for a replay.
				o.Taint("the file system changed while deciding")
			}
			return ans
		}
	}
	o.Obs = append(o.Obs, Observation{Probe: p, A: a, B: b, Answer: ans})
	return ans
}

// Taint on an Observer (for the engine's own recover).
func (o *Observer) Taint(why string) {
	if o != nil && o.Tainted == "" {
		o.Tainted = why
	}
}

// Unchanged asks every question again and reports whether each answer is
// the one written down.
func (o *Observer) Unchanged() bool {
	for _, x := range o.Obs {
		if answer(x.Probe, x.A, x.B) != x.Answer {
			return false
		}
	}
	return true
}

func modeAnswer(fi os.FileInfo, err error) string {
	if err != nil {
		return "-"
	}
	return strconv.FormatUint(uint64(fi.Mode()), 16)
}

func boolAnswer(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// answer asks the file system question p(a, b) now.
func answer(p Probe, a, b string) string {
	switch p {
	case ProbeStat:
		return modeAnswer(os.Stat(a))
	case ProbeLstat:
		return modeAnswer(os.Lstat(a))
	case ProbeHash:
		sum, err := FileSHA256(a)
		if err != nil {
			return "!" + err.Error()
		}
		return sum
	case ProbeExec:
		var dirs []string
		if b != "" {
			dirs = strings.Split(b, "\x00")
		}
		return strings.Join(program.Exec(a, dirs...), "\x00")
	case ProbeSetID:
		return boolAnswer(IsSetID(a))
	case ProbeHardLink:
		v, ok := HardLinked(a, b == "w")
		if !ok {
			return ""
		}
		return string(v.Verdict) + "\x00" + string(v.Risk) + "\x00" + v.Reason
	case ProbePrivileged:
		return PrivilegedOnly(a)
	case ProbeRecursive:
		return boolAnswer(RecursiveOutside(a))
	case ProbeEvalLinks:
		real, err := filepath.EvalSymlinks(a)
		if err != nil {
			return "!"
		}
		return real
	case ProbeExists:
		return boolAnswer(Exists(a, b))
	case ProbeDigest:
		return projectFileDigest(a)
	}
	panic("toolspec: unknown probe " + strconv.Itoa(int(p)))
}

// Stat is os.Stat's mode; ok is false when it failed.
func (ctx *DecideCtx) Stat(path string) (os.FileMode, bool) {
	return parseMode(ctx.ask(ProbeStat, path, ""))
}

// Lstat is os.Lstat's mode; ok is false when it failed.
func (ctx *DecideCtx) Lstat(path string) (os.FileMode, bool) {
	return parseMode(ctx.ask(ProbeLstat, path, ""))
}

func parseMode(s string) (os.FileMode, bool) {
	if s == "-" {
		return 0, false
	}
	m, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		panic("toolspec: bad mode answer " + s)
	}
	return os.FileMode(m), true
}

// FileSHA256 is FileSHA256, observed.
func (ctx *DecideCtx) FileSHA256(path string) (string, error) {
	ans := ctx.ask(ProbeHash, path, "")
	if msg, bad := strings.CutPrefix(ans, "!"); bad {
		return "", probeError(msg)
	}
	return ans, nil
}

type probeError string

func (e probeError) Error() string { return string(e) }

// ProgramExec is program.Exec(path, searchPath...), observed.
func (ctx *DecideCtx) ProgramExec(path string, searchPath []string) []string {
	return strings.Split(ctx.ask(ProbeExec, path, strings.Join(searchPath, "\x00")), "\x00")
}

// IsSetID is IsSetID, observed.
func (ctx *DecideCtx) IsSetID(path string) bool { return ctx.ask(ProbeSetID, path, "") == "1" }

// HardLinked is HardLinked, observed.
func (ctx *DecideCtx) HardLinked(real string, write bool) (PathVerdict, bool) {
	w := "r"
	if write {
		w = "w"
	}
	ans := ctx.ask(ProbeHardLink, real, w)
	if ans == "" {
		return PathVerdict{}, false
	}
	f := strings.SplitN(ans, "\x00", 3)
	return PathVerdict{Verdict: verdict.Verdict(f[0]), Risk: verdict.Risk(f[1]), Reason: f[2]}, true
}

// PrivilegedOnly is PrivilegedOnly, observed.
func (ctx *DecideCtx) PrivilegedOnly(real string) string { return ctx.ask(ProbePrivileged, real, "") }

// RecursiveOutside is RecursiveOutside, observed.
func (ctx *DecideCtx) RecursiveOutside(real string) bool {
	return ctx.ask(ProbeRecursive, real, "") == "1"
}

// EvalSymlinks is filepath.EvalSymlinks, observed (the error only as
// failure).
func (ctx *DecideCtx) EvalSymlinks(path string) (string, bool) {
	ans := ctx.ask(ProbeEvalLinks, path, "")
	return ans, ans != "!"
}

// Exists is Exists, observed.
func (ctx *DecideCtx) Exists(dir, name string) bool { return ctx.ask(ProbeExists, dir, name) == "1" }

// ProjectFiles digests the entry files of a command that runs project code:
// path -> "sha256:HEX", "absent", or why it could not be read; each digest
// observed.
func (ctx *DecideCtx) ProjectFiles(pc *grammar.Parsed, paths []string) map[string]string {
	if !pc.Code || len(paths) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, p := range paths {
		out[p] = ctx.ask(ProbeDigest, p, "")
	}
	return out
}

// Unchanged re-asks every path component in the memo and reports whether
// each is what the decision saw.
func (m PathMemo) Unchanged() bool {
	for p, c := range m {
		if PathMemo(nil).lstat(p) != c {
			return false
		}
	}
	return true
}

// Bytes is roughly what the memo holds, for a cache's bound.
func (m PathMemo) Bytes() int64 {
	var n int64
	for p, c := range m {
		n += int64(64 + len(p) + len(c.target))
	}
	return n
}
