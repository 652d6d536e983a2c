// Package projects owns the per-project policy layers. A workspace may carry
// a project policy (config `project_policy`, default .termd/policy.yaml) that
// narrows the system policy for commands whose working directory is inside
// that workspace. It can only make decisions stricter; an invalid or
// widening file denies every command in its workspace until it is fixed
// (fail closed). Writes to it are denied (Paths are protected files).
// Reloading the policy re-reads the system policy and then every layer.
//
// The broker holds one Projects; its methods are safe to call with or
// without the broker's lock (the layers are replaced whole, atomically).
//
// It may import daemon/config, daemon/errdefs, daemon/policy, the proto
// package and lower packages, never daemon/broker nor another of the
// broker's noun packages.
package projects

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Deps are what the project layers need.
type Deps struct {
	Config func() *config.Config
	Policy *policy.Engine // the system policy
	Log    *slog.Logger
	// Metrics observes policy reloads (nil = none).
	Metrics interface{ PolicyReloaded(ok bool) }
}

// layer is one workspace's project policy.
type layer struct {
	root string
	path string
	pol  *policy.Policy // narrowed; nil when err is set
	err  error
}

// Projects holds the project policy of every workspace that has one.
type Projects struct {
	d      Deps
	layers atomic.Pointer[[]layer] // replaced whole by Load, never changed in place
}

// New returns project layers with none loaded (call Load).
func New(d Deps) *Projects { return &Projects{d: d} }

// Load (re)reads every workspace's project policy.
func (p *Projects) Load() {
	cfg := p.d.Config()
	var out []layer
	if cfg.ProjectPolicy != "" {
		sys := p.d.Policy.Current()
		for _, root := range cfg.Workspaces {
			path := filepath.Join(root, cfg.ProjectPolicy)
			proj, err := policy.LoadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			l := layer{root: root, path: path, err: err}
			if err == nil {
				l.pol, l.err = sys.Narrow(proj)
			}
			if l.err != nil {
				p.d.Log.Error("project policy refused: commands in its workspace are denied until it is fixed", "file", path, "error", l.err)
			} else {
				p.d.Log.Info("project policy narrows the system policy", "file", path, "version", l.pol.Version())
			}
			out = append(out, l)
		}
	}
	p.layers.Store(&out)
}

func (p *Projects) loaded() []layer {
	if l := p.layers.Load(); l != nil {
		return *l
	}
	return nil
}

// layerFor returns the project policy that applies to cwd, if any. With
// no project policy loaded there is nothing to match, and cwd is not resolved
// (the policy resolves it for the decision anyway).
func (p *Projects) layerFor(cwd string) *layer {
	layers := p.loaded()
	if len(layers) == 0 {
		return nil
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		real = filepath.Clean(cwd)
	}
	for i := range layers {
		l := &layers[i]
		if real == l.root || strings.HasPrefix(real, l.root+string(filepath.Separator)) {
			return l
		}
	}
	return nil
}

// Paths are the project policy files (protected from writes).
func (p *Projects) Paths() []string {
	cfg := p.d.Config()
	if cfg.ProjectPolicy == "" {
		return nil
	}
	var out []string
	for _, root := range cfg.Workspaces {
		out = append(out, filepath.Join(root, cfg.ProjectPolicy))
	}
	return out
}

// Narrowed reports whether v is the version of a workspace's narrowed
// policy (a grant made under a project policy).
func (p *Projects) Narrowed(v string) bool {
	for _, l := range p.loaded() {
		if l.pol != nil && l.pol.Version() == v {
			return true
		}
	}
	return false
}

// Decide decides with the system policy, narrowed by the project's.
func (p *Projects) Decide(req policy.Request, ctx policy.Context) policy.Explanation {
	pol := p.d.Policy.Current()
	l := p.layerFor(req.Cwd)
	if l != nil && l.pol != nil {
		pol = l.pol
	}
	ex := pol.Explain(req, ctx)
	if l != nil && l.err != nil {
		d := &ex.Decision
		d.Verdict, d.Risk = policy.Deny, policy.RiskHigh
		d.Reasons = append(d.Reasons, fmt.Sprintf("the project policy %s is invalid, so nothing runs in this workspace until it is fixed: %v", l.path, l.err))
		d.Steps = append(d.Steps, policy.Step{Name: "project-policy", Outcome: "deny", Detail: l.err.Error()})
		ex.Verdict, ex.Risk, ex.Reasons, ex.Steps = d.Verdict, d.Risk, d.Reasons, d.Steps
	}
	return ex
}

// Reload re-reads the system policy file, then every project layer; a bad
// system policy file keeps the last good policy (and the layers as they are).
func (p *Projects) Reload() (*termdv1.ReloadPolicyResponse, error) {
	prev := p.d.Policy.Current().Version()
	changed, err := p.d.Policy.Reload()
	if p.d.Metrics != nil {
		p.d.Metrics.PolicyReloaded(err == nil)
	}
	if err != nil {
		p.d.Log.Error("policy reload refused; keeping the last good policy", "error", err)
		return nil, errdefs.Invalid("policy reload refused, the last good policy (%s) stays active: %s", prev, strings.TrimSpace(err.Error()))
	}
	p.Load()
	now := p.d.Policy.Current().Version()
	if changed {
		p.d.Log.Info("policy reloaded", "version", now, "previous", prev)
	}
	return &termdv1.ReloadPolicyResponse{Changed: changed, Version: now, PreviousVersion: prev}, nil
}
