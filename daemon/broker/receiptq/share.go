package receiptq

import (
	"context"
	"sync"
	"time"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/receiptstore"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// shareCache keeps, for a few seconds, the unsigned share form of each
// execution's receipt as the store's writer sealed it, so the share form a
// client asks for with the final event (ExecuteAndWait's share_receipt, the
// MCP bridge's case) is signed from it rather than read back from SQLite
// and verified again: termd signed that receipt a moment ago. What the
// client gets is byte-identical to ExportReceipt's share form. Each form is
// taken once; past shareKeep or shareMax, the store answers as before.
type shareCache struct {
	mu sync.Mutex
	m  map[string]shareEntry
}

type shareEntry struct {
	form *receipt.Receipt
	at   time.Time
}

const (
	shareKeep = 10 * time.Second
	shareMax  = 256
)

// put keeps the share form of a receipt the store just sealed.
func (c *shareCache) put(stored *receipt.Receipt) {
	form, now := receiptstore.ShareForm(stored), time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]shareEntry{}
	}
	if len(c.m) >= shareMax/2 {
		for id, e := range c.m {
			if now.Sub(e.at) > shareKeep || len(c.m) >= shareMax {
				delete(c.m, id)
			}
		}
	}
	c.m[stored.ID] = shareEntry{form: form, at: now}
}

// take returns and forgets the kept share form of receipt id (nil: none).
func (c *shareCache) take(id string) *receipt.Receipt {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok {
		return nil
	}
	delete(c.m, id)
	if time.Since(e.at) > shareKeep {
		return nil
	}
	return e.form
}

// KeepShare keeps the share form of a receipt the store just sealed, for
// ShareReceipt (see shareCache).
func (rq *Receipts) KeepShare(stored *receipt.Receipt) { rq.shares.put(stored) }

// ShareReceipt is ExportReceipt's share form of receipt id, signed from the
// form kept when the receipt was sealed when there is one (see shareCache).
func (rq *Receipts) ShareReceipt(ctx context.Context, caller *termdv1.Principal, id string) (*receipt.Receipt, error) {
	r, _, err := rq.share(ctx, caller, id, false)
	return r, err
}

// ShareReceiptJSON is ShareReceipt's receipt as receipt.IndentedJSON (what
// the server sends for ExportReceipt); one signed from a kept form is
// encoded once for its signatures and its JSON.
func (rq *Receipts) ShareReceiptJSON(ctx context.Context, caller *termdv1.Principal, id string) ([]byte, error) {
	_, js, err := rq.share(ctx, caller, id, true)
	return js, err
}

// share is ShareReceipt, and with asJSON its JSON too.
func (rq *Receipts) share(ctx context.Context, caller *termdv1.Principal, id string, asJSON bool) (*receipt.Receipt, []byte, error) {
	if form := rq.shares.take(id); form != nil && domain.ReceiptVisible(caller, form) {
		var js []byte
		var err error
		if asJSON {
			js, err = receiptstore.SignShareJSON(form, rq.Keys)
		} else {
			_, err = receiptstore.SignShare(form, rq.Keys)
		}
		if err == nil {
			return form, js, nil
		}
	}
	r, err := rq.ExportReceipt(ctx, caller, id, true)
	if err != nil || !asJSON {
		return r, nil, err
	}
	js, err := receipt.IndentedJSON(r)
	return r, js, err
}
