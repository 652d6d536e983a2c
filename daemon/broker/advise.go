package broker

import (
	"context"

	"github.com/termd/termd/daemon/broker/advice"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
	"google.golang.org/protobuf/proto"
)

// Advise asks the adviser (daemon/broker/advice). Its answer is data: the
// only effect it can have on a plan is to raise scrutiny (a flagged plan
// needs approval in every mode).
func (b *Broker) Advise(ctx context.Context, caller *termdv1.Principal, r *termdv1.AdviseRequest, send func(*termdv1.AdviseResponse) error) error {
	return b.advice.Advise(ctx, caller, r, send)
}

// forgetAdvice drops a closed session's conversation.
func (b *Broker) forgetAdvice(sessionID string) { b.advice.Forget(sessionID) }

// adviceHost is what the advice package sees of the broker.
type adviceHost struct{ b *Broker }

func (h adviceHost) Plan(caller *termdv1.Principal, id string) (advice.Plan, error) {
	h.b.mu.Lock()
	defer h.b.unlock()
	p, err := h.b.planLocked(caller, id)
	if err != nil {
		return advice.Plan{}, err
	}
	// A copy: the decision is read after the broker's lock is released.
	d := proto.Clone(p.p.Decision).(*termdv1.Decision)
	return advice.Plan{ID: p.p.Id, State: stateWord(p.p.State), SessionID: p.session.ID, Decision: d, Preview: p.p.Preview.GetSummary()}, nil
}

func (h adviceHost) Receipt(ctx context.Context, caller *termdv1.Principal, id string) (*receipt.Receipt, error) {
	return h.b.GetReceipt(ctx, caller, id, "")
}

func (h adviceHost) CheckSession(caller *termdv1.Principal, id string) error {
	return h.b.checkSession(caller, id)
}

func (h adviceHost) FlagPlan(caller *termdv1.Principal, id, digest string, flagged bool) error {
	return h.b.FlagPlan(caller, id, digest, flagged)
}
