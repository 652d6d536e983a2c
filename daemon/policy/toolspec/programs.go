package toolspec

import (
	"maps"
	"slices"
)

// Program is what a program runs with: a policy's programs.<name> entry
// (what it adds to the tool spec's forced settings) and, for each program,
// the sum of both (EffectivePrograms).
type Program struct {
	ExecEnv  map[string]string `yaml:"exec_env" json:"exec_env"`
	ExecArgs []string          `yaml:"exec_args" json:"exec_args"`
	// SandboxExec: absolute paths (files or directories) the program runs
	// itself, which a read-only sandbox must let it execute (git's
	// git-core helpers).
	SandboxExec []string `yaml:"sandbox_exec,omitempty" json:"sandbox_exec,omitempty"`
	// SandboxCache: directories under the principal's private HOME ("~/…")
	// the program keeps its own cache in, writable even in a read-only
	// sandbox (go list and go vet fill the Go build cache).
	SandboxCache []string `yaml:"sandbox_cache,omitempty" json:"sandbox_cache,omitempty"`
}

// EffectivePrograms: what each program is forced to run with and needs in the
// sandbox. The defaults are the tool specs' (execArgs, execEnv,
// sandboxExec, sandboxCache); a system policy's programs: section adds to
// them, never takes away:
//   - exec_args come after the spec's, except the groups the spec already
//     forces (a policy copied from an older default keeps working and runs
//     each argument once);
//   - exec_env variables are added, and the policy's value wins over the
//     spec's for the same name (the operator's own system policy);
//   - sandbox_exec and sandbox_cache are added.
//
// The result is part of the policy's canonical text, so the policy version
// changes with what a build forces.
func EffectivePrograms(operator map[string]Program) map[string]Program {
	out := map[string]Program{}
	for name, t := range Tools() {
		if len(t.ExecArgs) == 0 && len(t.ExecEnv) == 0 && len(t.SandboxExec) == 0 && len(t.SandboxCache) == 0 {
			continue
		}
		out[name] = Program{
			ExecArgs:     slices.Concat(t.ExecArgs...),
			ExecEnv:      maps.Clone(t.ExecEnv),
			SandboxExec:  slices.Clone(t.SandboxExec),
			SandboxCache: slices.Clone(t.SandboxCache),
		}
	}
	for name, op := range operator {
		ps := out[name]
		var groups [][]string
		if t := Tools()[name]; t != nil {
			groups = t.ExecArgs
		}
		ps.ExecArgs = append(ps.ExecArgs, argsBeyond(groups, op.ExecArgs)...)
		if len(op.ExecEnv) > 0 && ps.ExecEnv == nil {
			ps.ExecEnv = map[string]string{}
		}
		maps.Copy(ps.ExecEnv, op.ExecEnv)
		ps.SandboxExec = appendNew(ps.SandboxExec, op.SandboxExec)
		ps.SandboxCache = appendNew(ps.SandboxCache, op.SandboxCache)
		out[name] = ps
	}
	return out
}

// argsBeyond is args without the groups already forced, read left to right.
func argsBeyond(forced [][]string, args []string) []string {
	var out []string
next:
	for i := 0; i < len(args); {
		for _, g := range forced {
			if len(g) > 0 && i+len(g) <= len(args) && slices.Equal(args[i:i+len(g)], g) {
				i += len(g)
				continue next
			}
		}
		out = append(out, args[i])
		i++
	}
	return out
}

// appendNew adds the entries of more that list lacks, in order.
func appendNew(list, more []string) []string {
	for _, x := range more {
		if !slices.Contains(list, x) {
			list = append(list, x)
		}
	}
	return list
}
