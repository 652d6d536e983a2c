package broker

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/termd/termd/daemon/broker/sessions"
	"github.com/termd/termd/daemon/broker/terminals"
	"github.com/termd/termd/daemon/events"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The terminals of PTY executions live in daemon/broker/terminals; the
// broker makes an execution's hub, finds it for the terminal calls, and
// converts a requested terminal between the API and the policy.

// termHost is the broker as the terminals see it.
type termHost struct{ b *Broker }

func (h termHost) Find(caller *termdv1.Principal, id string) (*terminals.Hub, error) {
	return h.b.hubFor(caller, id)
}

func (h termHost) AcquireStream(caller *termdv1.Principal) (func(), error) {
	return h.b.acquireStream(caller)
}

func (h termHost) Bus() *events.Bus { return h.b.Bus }
func (h termHost) Now() time.Time   { return h.b.Now() }

func (h termHost) EventOf(ev *termdv1.Event, execID, planID string) bool {
	return sessions.EventOf(ev, execID, planID)
}

// hubFor finds the terminal of an execution the caller may see (nil: it has none).
func (b *Broker) hubFor(caller *termdv1.Principal, id string) (*terminals.Hub, error) {
	b.mu.Lock()
	defer b.unlock()
	e, err := b.execLocked(caller, id)
	if err != nil {
		return nil, err
	}
	return e.hub, nil
}

// newTermHub makes the terminal of PTY execution e (before its spawn, once
// its redactor is set).
func newTermHub(b *Broker, e *execRec, t *policy.Terminal, holder *termdv1.Principal) *terminals.Hub {
	return b.terms.NewHub(terminals.Exec{
		ID: e.id, PlanID: e.plan.p.Id, SessionID: e.plan.session.ID,
		Requester: e.plan.p.Requester, Redactor: e.Redactor,
		Snapshot: func() (*termdv1.Execution, bool) {
			b.mu.Lock()
			defer b.unlock()
			return proto.Clone(e.e).(*termdv1.Execution), e.finished
		},
	}, t, holder)
}

// SendInput writes input to a terminal the caller holds the input of and,
// with wait, returns when the program is ready for more.
func (b *Broker) SendInput(ctx context.Context, caller *termdv1.Principal, r *termdv1.SendInputRequest) (*termdv1.SendInputResponse, error) {
	return b.terms.SendInput(ctx, caller, r)
}

// TakeInput makes the caller the terminal's input holder: an operator
// always, the requester unless an operator holds it.
func (b *Broker) TakeInput(ctx context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	return b.terms.TakeInput(ctx, caller, id)
}

// ReleaseInput hands a terminal's input back to its requester.
func (b *Broker) ReleaseInput(ctx context.Context, caller *termdv1.Principal, id string) (*termdv1.Execution, error) {
	return b.terms.ReleaseInput(ctx, caller, id)
}

// ResizeTerminal sets the terminal's size (the input holder or an operator).
func (b *Broker) ResizeTerminal(ctx context.Context, caller *termdv1.Principal, id string, size *termdv1.TerminalOptions) (*termdv1.Execution, error) {
	return b.terms.ResizeTerminal(ctx, caller, id, size)
}

// GetScreen returns the rendered screen and, on request, scrollback lines.
func (b *Broker) GetScreen(ctx context.Context, caller *termdv1.Principal, r *termdv1.GetScreenRequest) (*termdv1.GetScreenResponse, error) {
	return b.terms.GetScreen(ctx, caller, r)
}

// AttachTerminal sends the screen, then output from sinceOffset (-1: from
// now) and the execution's terminal and state events, until its receipt.
// The client going away only detaches.
func (b *Broker) AttachTerminal(ctx context.Context, caller *termdv1.Principal, r *termdv1.AttachTerminalRequest, send func(*termdv1.AttachTerminalResponse) error) error {
	return b.terms.AttachTerminal(ctx, caller, r, send)
}
