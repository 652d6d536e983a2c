package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/termd/termd/daemon/policy"
)

// A workspace may carry a project policy (config `project_policy`, default
// .termd/policy.yaml) that narrows the system policy for commands whose
// working directory is inside that workspace. It can only make decisions
// stricter; an invalid or widening file denies every command in its
// workspace until it is fixed (fail closed). Writes to it are denied.

type projectPolicy struct {
	root string
	path string
	pol  *policy.Policy // narrowed; nil when err is set
	err  error
}

// loadProjectPolicies (re)reads every workspace's project policy.
func (b *Broker) loadProjectPolicies() {
	cfg := b.Config()
	var out []projectPolicy
	if cfg.ProjectPolicy != "" {
		sys := b.Policy.Current()
		for _, root := range cfg.Workspaces {
			path := filepath.Join(root, cfg.ProjectPolicy)
			proj, err := policy.LoadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			pp := projectPolicy{root: root, path: path, err: err}
			if err == nil {
				pp.pol, pp.err = sys.Narrow(proj)
			}
			if pp.err != nil {
				b.Log.Error("project policy refused: commands in its workspace are denied until it is fixed", "file", path, "error", pp.err)
			} else {
				b.Log.Info("project policy narrows the system policy", "file", path, "version", pp.pol.Version())
			}
			out = append(out, pp)
		}
	}
	b.mu.Lock()
	b.projects = out
	b.unlock()
}

// projectFor returns the project policy that applies to cwd, if any. With
// no project policy loaded there is nothing to match, and cwd is not resolved
// (the policy resolves it for the decision anyway).
func (b *Broker) projectFor(cwd string) *projectPolicy {
	b.mu.Lock()
	projects := b.projects // replaced whole by loadProjectPolicies, never changed in place
	b.unlock()
	if len(projects) == 0 {
		return nil
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		real = filepath.Clean(cwd)
	}
	for i := range projects {
		p := &projects[i]
		if real == p.root || strings.HasPrefix(real, p.root+string(filepath.Separator)) {
			return p
		}
	}
	return nil
}

// projectPolicyPaths are the project policy files (protected from writes).
func (b *Broker) projectPolicyPaths() []string {
	cfg := b.Config()
	if cfg.ProjectPolicy == "" {
		return nil
	}
	var out []string
	for _, root := range cfg.Workspaces {
		out = append(out, filepath.Join(root, cfg.ProjectPolicy))
	}
	return out
}

// decideWith decides with the system policy, narrowed by the project's.
func (b *Broker) decideWith(req policy.Request, ctx policy.Context) policy.Explanation {
	pol := b.Policy.Current()
	pp := b.projectFor(req.Cwd)
	if pp != nil && pp.pol != nil {
		pol = pp.pol
	}
	ex := pol.Explain(req, ctx)
	if pp != nil && pp.err != nil {
		d := &ex.Decision
		d.Verdict, d.Risk = policy.Deny, policy.RiskHigh
		d.Reasons = append(d.Reasons, fmt.Sprintf("the project policy %s is invalid, so nothing runs in this workspace until it is fixed: %v", pp.path, pp.err))
		d.Steps = append(d.Steps, policy.Step{Name: "project-policy", Outcome: "deny", Detail: pp.err.Error()})
		ex.Verdict, ex.Risk, ex.Reasons, ex.Steps = d.Verdict, d.Risk, d.Reasons, d.Steps
	}
	return ex
}
