package policy

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
)

// Engine holds the current policy and reloads it from a file, keeping the
// last good policy when the new one is bad.
type Engine struct {
	path string
	mu   sync.Mutex // serialises reloads
	cur  atomic.Pointer[Policy]
}

// NewEngine loads path ("" = the embedded default).
func NewEngine(path string) (*Engine, error) {
	e := &Engine{path: path}
	var p *Policy
	var err error
	if path == "" {
		p = Default()
	} else if p, err = LoadFile(path); err != nil {
		return nil, err
	}
	e.cur.Store(p)
	return e, nil
}

// Current returns the policy in force.
func (e *Engine) Current() *Policy { return e.cur.Load() }

// Reload re-reads the file. On error the previous policy stays in force.
func (e *Engine) Reload() (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.path == "" {
		return false, nil
	}
	p, err := LoadFile(e.path)
	if err != nil {
		return false, err
	}
	old := e.cur.Load()
	if old != nil && old.Version() == p.Version() {
		return false, nil
	}
	e.cur.Store(p)
	return true, nil
}

// Decide decides with the current policy.
func (e *Engine) Decide(req decision.Request, ctx decision.Context) decision.Decision {
	return e.Current().Decide(req, ctx)
}

// Explanation is the output of Explain.
type Explanation struct {
	Request       json.RawMessage   `json:"request"` // canonical request JSON
	RequestHash   string            `json:"request_hash"`
	PolicyVersion string            `json:"policy_version"`
	Verdict       verdict.Verdict   `json:"verdict"`
	Risk          verdict.Risk      `json:"risk"`
	Reasons       []string          `json:"reasons"`
	Rules         []string          `json:"rules"`
	Steps         []decision.Step   `json:"steps"`
	Decision      decision.Decision `json:"decision"`
}

// Explain decides and returns the canonical request, its hash, the
// decision and every step considered.
func (p *Policy) Explain(req decision.Request, ctx decision.Context) Explanation {
	d := p.Decide(req, ctx)
	c := p.canonical(d)
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	b, _ := json.Marshal(c)
	return Explanation{Request: b, RequestHash: d.RequestHash, PolicyVersion: d.PolicyVersion, Verdict: d.Verdict, Risk: d.Risk, Reasons: d.Reasons, Rules: d.Rules, Steps: d.Steps, Decision: d}
}
