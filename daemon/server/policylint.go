package server

import (
	"context"
	"errors"

	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// LintPolicy checks a policy text as termd would load it and installs
// nothing; `termctl policy lint` sends a file's text here so that no client
// links the policy engine. A bad policy is an answer, not an error.
func (s policySvc) LintPolicy(_ context.Context, r *termdv1.LintPolicyRequest) (*termdv1.LintPolicyResponse, error) {
	name := r.Name
	if name == "" {
		name = "policy"
	}
	if _, err := policy.Parse(name, []byte(r.Text)); err != nil {
		resp := &termdv1.LintPolicyResponse{Problem: err.Error()}
		var le *policy.LoadError
		if errors.As(err, &le) && le.Line > 0 {
			resp.Line = uint32(le.Line)
		}
		return resp, nil
	}
	return &termdv1.LintPolicyResponse{Valid: true}, nil
}
