package policy

import (
	"maps"
	"slices"
)

// programs: what each program is forced to run with and needs in the
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
func effectivePrograms(operator map[string]programSpec) map[string]programSpec {
	out := map[string]programSpec{}
	for name, t := range tools() {
		if len(t.execArgs) == 0 && len(t.execEnv) == 0 && len(t.sandboxExec) == 0 && len(t.sandboxCache) == 0 {
			continue
		}
		out[name] = programSpec{
			ExecArgs:     slices.Concat(t.execArgs...),
			ExecEnv:      maps.Clone(t.execEnv),
			SandboxExec:  slices.Clone(t.sandboxExec),
			SandboxCache: slices.Clone(t.sandboxCache),
		}
	}
	for name, op := range operator {
		ps := out[name]
		var groups [][]string
		if t := tools()[name]; t != nil {
			groups = t.execArgs
		}
		ps.ExecArgs = append(ps.ExecArgs, argsBeyond(groups, op.ExecArgs)...)
		if len(op.ExecEnv) > 0 && ps.ExecEnv == nil {
			ps.ExecEnv = map[string]string{}
		}
		maps.Copy(ps.ExecEnv, op.ExecEnv)
		ps.SandboxExec = union(ps.SandboxExec, op.SandboxExec)
		ps.SandboxCache = union(ps.SandboxCache, op.SandboxCache)
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
