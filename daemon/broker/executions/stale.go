package executions

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/termd/termd/daemon/policy"
)

// Stale compares an approved decision with a fresh one.
func Stale(was, now policy.Decision) string {
	switch {
	case now.Verdict == policy.Deny:
		return "the policy now denies it"
	case was.BinarySHA256 != now.BinarySHA256 || was.ResolvedPath != now.ResolvedPath:
		return fmt.Sprintf("the program changed (%s)", now.ResolvedPath)
	case was.Cwd != now.Cwd:
		return fmt.Sprintf("the working directory now resolves to %s, not %s", now.Cwd, was.Cwd)
	case was.PolicyVersion != now.PolicyVersion:
		return "the policy changed since the plan was decided"
	case !maps.Equal(was.ProjectFiles, now.ProjectFiles):
		var changed []string
		for f, sum := range now.ProjectFiles {
			if was.ProjectFiles[f] != sum {
				changed = append(changed, f)
			}
		}
		slices.Sort(changed)
		return "project files it runs changed since the plan was decided: " + strings.Join(changed, ", ")
	case was.RequestHash != now.RequestHash:
		return "the canonical request changed"
	}
	return ""
}
