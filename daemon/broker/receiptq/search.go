package receiptq

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/search"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// searchCatchUp is how long a search waits for the index to catch up with
// receipts appended just before it (normally a few; after a rebuild or a
// start with many receipts the answer says it is incomplete instead).
const searchCatchUp = 2 * time.Second

// SearchReceipts finds receipts by a literal phrase among those the caller
// may see (the visibility of ListReceipts and GetReceipt: an agent, only
// its own). A receipt the caller may not see is never a hit and never
// counted, so a search cannot tell "absent" from "not yours".
func (rq *Receipts) SearchReceipts(ctx context.Context, caller *termdv1.Principal, r *termdv1.SearchReceiptsRequest) (*termdv1.SearchReceiptsResponse, error) {
	if rq.Search == nil {
		return nil, errdefs.Precondition("search is not available in this daemon")
	}
	q := search.Query{
		Phrase:    r.Query,
		SessionID: r.SessionId,
		Principal: r.Principal,
		Limit:     int(r.Limit),
		PageToken: r.PageToken,
	}
	if r.Status != "" {
		st := receipt.Status(strings.ToLower(r.Status))
		if !st.Valid() {
			return nil, errdefs.Invalid("status %q is not a receipt status (%s)", r.Status, statusList())
		}
		q.Status = string(st)
	}
	if r.Since != nil {
		q.Since = r.Since.AsTime()
	}
	if r.Until != nil {
		q.Until = r.Until.AsTime()
	}
	if err := q.Check(); err != nil {
		return nil, errdefs.Invalid("%s", strings.TrimPrefix(err.Error(), search.ErrInvalid.Error()+": "))
	}
	out := &termdv1.SearchReceiptsResponse{}
	if caller.GetRole() == termdv1.Role_ROLE_AGENT {
		if q.Principal != "" && q.Principal != domain.PrincipalKey(caller) {
			return out, nil
		}
		q.Requester = domain.PrincipalKey(caller)
	}
	behind, err := rq.Search.CatchUp(ctx, time.Now().Add(searchCatchUp))
	if err != nil {
		return nil, searchError(err)
	}
	out.Incomplete = behind
	page, err := rq.Search.Search(q)
	if err != nil {
		return nil, searchError(err)
	}
	out.NextPageToken = page.NextPageToken
	for _, m := range page.Matches {
		// The hit is shown from the receipt itself (the primary store),
		// with the same visibility rule as GetReceipt.
		rc, err := rq.Store.Get(m.ID)
		if errors.Is(err, receiptstore.ErrNotFound) {
			continue // pruned since it was indexed
		}
		if err != nil {
			return nil, errdefs.Internal("reading receipts: %v", err)
		}
		if !domain.ReceiptVisible(caller, rc) {
			continue
		}
		field, snippet, _ := search.Snippet(search.Fields(rc), r.Query)
		out.Hits = append(out.Hits, &termdv1.SearchHit{Receipt: Summary(rc), Field: field, Snippet: snippet})
	}
	return out, nil
}

// ReindexReceipts rebuilds the search index from the receipts (operators).
func (rq *Receipts) ReindexReceipts(ctx context.Context, caller *termdv1.Principal) (*termdv1.ReindexReceiptsResponse, error) {
	if rq.Search == nil {
		return nil, errdefs.Precondition("search is not available in this daemon")
	}
	n, err := rq.Search.Rebuild(ctx)
	if err != nil {
		return nil, searchError(err)
	}
	rq.Log.Info("rebuilt the search index", "by", domain.PrincipalKey(caller), "receipts", n)
	return &termdv1.ReindexReceiptsResponse{Indexed: n}, nil
}

func searchError(err error) error {
	if errors.Is(err, search.ErrUnavailable) {
		return errdefs.Unavailable("%v", err)
	}
	return errdefs.Internal("search index: %v", err)
}
