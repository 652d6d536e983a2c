package receiptq

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/search"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

var (
	alice    = &termdv1.Principal{Uid: 1000, Name: "alice", Role: termdv1.Role_ROLE_AGENT}
	bob      = &termdv1.Principal{Uid: 2000, Name: "bob", Role: termdv1.Role_ROLE_AGENT}
	viewer   = &termdv1.Principal{Uid: 3000, Name: "vera", Role: termdv1.Role_ROLE_VIEWER}
	operator = &termdv1.Principal{Uid: 0, Name: "root", Role: termdv1.Role_ROLE_OPERATOR}
)

// newReceipts is a Receipts over a real receipt store and search index in
// a temporary directory; Session refuses every session but "s-alice" to
// anyone but alice's key, as the broker's session check would.
func newReceipts(t *testing.T) *Receipts {
	t.Helper()
	dir := t.TempDir()
	keys, err := receiptstore.LoadOrCreateKeys(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := receiptstore.Open(filepath.Join(dir, "receipts.db"), keys)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	idx := search.Open(filepath.Join(dir, "search.db"), store, log)
	t.Cleanup(func() { idx.Close(); store.Close() })
	return &Receipts{Store: store, Keys: keys, Search: idx, Log: log, Now: time.Now,
		Session: func(caller *termdv1.Principal, id string) error {
			if id == "s-alice" && caller.Uid == alice.Uid || caller.Role != termdv1.Role_ROLE_AGENT {
				return nil
			}
			return errdefs.NotFound("session %s not found", id)
		}}
}

// ran stores the receipt of `echo WORD` run by p in session s.
func ran(t *testing.T, rq *Receipts, p *termdv1.Principal, s, word string) *receipt.Receipt {
	t.Helper()
	uid := int(p.Uid)
	cmd := "echo " + word
	at := time.Now().Add(-time.Minute)
	code := 0
	r := &receipt.Receipt{
		ID: "r-" + word, PlanID: "p-" + word, SessionID: s, ExecutionID: "e-" + word,
		RequestHash: strings.Repeat("ab", 32),
		Requester:   receipt.Principal{Kind: "unix", ID: "uid:" + itoa(uid), Role: "agent", UID: &uid, Name: p.Name},
		Command:     cmd, CommandSHA256: rq.Keys.Digest([]byte(cmd)),
		BinaryPath: "/bin/echo", BinarySHA256: strings.Repeat("cd", 32), Cwd: "/w",
		Mode: "confirm", Risk: "low", Decision: string(receipt.DecisionAllow),
		Policy: receipt.Policy{Allowed: true, Risk: "low", Argv: []string{"echo", word}, Version: "v"},
		Limits: receipt.Limits{TimeoutMs: 1000, MaxOutputBytes: 1 << 20},
		Status: receipt.StatusSucceeded, ExitCode: &code, StartedAt: at, FinishedAt: at.Add(time.Millisecond), DurationMs: 1,
		Stdout: word + "\n", StdoutBytes: int64(len(word) + 1),
		StdoutDigest: rq.Keys.Digest([]byte(word + "\n")), StderrDigest: rq.Keys.Digest(nil),
	}
	stored, err := rq.Store.Append(r)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

func isKind(err error, k errdefs.Kind) bool { return err != nil && errdefs.KindOf(err) == k }

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func ids(rs []*receipt.Receipt) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

// An agent gets, lists, exports and finds only its own requests' receipts;
// one that is not its own is "not found", never "forbidden", and a viewer
// sees every receipt.
func TestAnAgentSeesOnlyItsOwnReceipts(t *testing.T) {
	rq := newReceipts(t)
	mine := ran(t, rq, alice, "s-alice", "needle-alice")
	theirs := ran(t, rq, bob, "s-bob", "needle-bob")
	ctx := t.Context()

	if _, err := rq.GetReceipt(ctx, alice, mine.ID, ""); err != nil {
		t.Fatalf("alice's own receipt: %v", err)
	}
	if _, err := rq.GetReceipt(ctx, alice, theirs.ID, ""); !isKind(err, errdefs.KindNotFound) || !strings.Contains(err.Error(), theirs.ID+" not found") {
		t.Fatalf("alice got bob's receipt: %v", err)
	}
	if _, err := rq.GetReceipt(ctx, alice, "", "s-bob"); !isKind(err, errdefs.KindNotFound) {
		t.Fatalf("alice got the latest receipt of bob's session: %v", err)
	}
	if r, err := rq.GetReceipt(ctx, alice, "", "s-alice"); err != nil || r.ID != mine.ID {
		t.Fatalf("the latest receipt of alice's session: %v, %v", r, err)
	}
	for _, c := range []struct {
		who  *termdv1.Principal
		q    *termdv1.ListReceiptsRequest
		want []string
	}{
		{alice, &termdv1.ListReceiptsRequest{}, []string{mine.ID}},
		{alice, &termdv1.ListReceiptsRequest{Principal: "uid:2000"}, nil},
		{alice, &termdv1.ListReceiptsRequest{SessionId: "s-bob"}, nil},
		{viewer, &termdv1.ListReceiptsRequest{}, []string{mine.ID, theirs.ID}},
		{operator, &termdv1.ListReceiptsRequest{Principal: "uid:2000"}, []string{theirs.ID}},
	} {
		rs, err := rq.ListReceipts(ctx, c.who, c.q)
		if err != nil || !slices.Equal(ids(rs), c.want) {
			t.Errorf("%s lists %v: %v, %v; want %v", c.who.Name, c.q, ids(rs), err, c.want)
		}
	}
	var exported []*receipt.Receipt
	if err := rq.ExportReceipts(ctx, alice, &termdv1.ExportReceiptsRequest{}, func(r *receipt.Receipt) error {
		exported = append(exported, r)
		return nil
	}); err != nil || !slices.Equal(ids(exported), []string{mine.ID}) {
		t.Errorf("alice exports %v, %v", ids(exported), err)
	}
	for _, who := range []*termdv1.Principal{alice, viewer} {
		res, err := rq.SearchReceipts(ctx, who, &termdv1.SearchReceiptsRequest{Query: "needle"})
		if err != nil {
			t.Fatal(err)
		}
		var hits []string
		for _, h := range res.Hits {
			hits = append(hits, h.Receipt.Id)
		}
		slices.Sort(hits)
		want := []string{mine.ID}
		if who == viewer {
			want = []string{mine.ID, theirs.ID}
		}
		if !slices.Equal(hits, want) || res.Incomplete {
			t.Errorf("%s finds %v (incomplete %v), want %v", who.Name, hits, res.Incomplete, want)
		}
	}
}

// Bad filters are refused with what to do instead.
func TestReceiptQueriesRefuseBadInput(t *testing.T) {
	rq := newReceipts(t)
	ctx := t.Context()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"no id", func() error { _, err := rq.GetReceipt(ctx, operator, "", ""); return err }(), "pass a receipt_id"},
		{"status", func() error {
			_, err := rq.ListReceipts(ctx, operator, &termdv1.ListReceiptsRequest{Status: "fine"})
			return err
		}(), `status "fine" is not a receipt status (`},
		{"page", func() error {
			_, err := rq.ListReceipts(ctx, operator, &termdv1.ListReceiptsRequest{Limit: 1001})
			return err
		}(), "page with offset"},
		{"prune without before", func() error {
			_, err := rq.PruneReceipts(ctx, operator, &termdv1.PruneReceiptsRequest{})
			return err
		}(), "before is required"},
		{"prune the future", func() error {
			_, err := rq.PruneReceipts(ctx, operator, &termdv1.PruneReceiptsRequest{Before: timestamppb.New(time.Now().Add(time.Hour))})
			return err
		}(), "is in the future"},
	} {
		if c.err == nil || !isKind(c.err, errdefs.KindInvalid) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want an invalid-argument error saying %q", c.name, c.err, c.want)
		}
	}
}

// The share form kept when a receipt was sealed is what ExportReceipt's
// share form is, byte for byte; it is taken once, and never handed to a
// caller who may not see the receipt.
func TestShareReceiptIsExportReceiptsShareForm(t *testing.T) {
	rq := newReceipts(t)
	ctx := t.Context()
	stored := ran(t, rq, alice, "s-alice", "shared")
	rq.KeepShare(stored)
	if _, err := rq.ShareReceipt(ctx, bob, stored.ID); !isKind(err, errdefs.KindNotFound) {
		t.Fatalf("bob got alice's share form: %v", err)
	}
	rq.KeepShare(stored)
	kept, err := rq.ShareReceipt(ctx, alice, stored.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rq.shares.take(stored.ID) != nil {
		t.Fatal("the kept share form was not taken")
	}
	exported, err := rq.ExportReceipt(ctx, alice, stored.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(kept)
	b, _ := json.Marshal(exported)
	if string(a) != string(b) {
		t.Fatalf("the share form signed from the kept form\n%s\ndiffers from ExportReceipt's\n%s", a, b)
	}
	if strings.Contains(string(a), "shared\\n") {
		t.Fatalf("the share form holds the output: %s", a)
	}
	if v := rq.VerifyReceipt(ctx, a); !v.Valid {
		t.Fatalf("the share form does not verify: %v", v.Problems)
	}
}

// ShareReceiptJSON is ExportReceipt's share form in the server's JSON
// (receipt.IndentedJSON), byte for byte, whether signed from a kept form
// (encoded once) or exported from the store, and verifies.
func TestShareReceiptJSONIsExportReceiptsJSON(t *testing.T) {
	rq := newReceipts(t)
	ctx := t.Context()
	stored := ran(t, rq, alice, "s-alice", "shared")
	exported, err := rq.ExportReceipt(ctx, alice, stored.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	want, err := receipt.IndentedJSON(exported)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{true, false} {
		if keep {
			rq.KeepShare(stored)
		}
		got, err := rq.ShareReceiptJSON(ctx, alice, stored.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("kept %v: ShareReceiptJSON\n%s\ndiffers from ExportReceipt's\n%s", keep, got, want)
		}
		if v := rq.VerifyReceipt(ctx, got); !v.Valid {
			t.Fatalf("kept %v: the share form does not verify: %v", keep, v.Problems)
		}
	}
	rq.KeepShare(stored)
	if _, err := rq.ShareReceiptJSON(ctx, bob, stored.ID); !isKind(err, errdefs.KindNotFound) {
		t.Fatalf("bob got alice's share form: %v", err)
	}
}

// The audit chain reports its head, and a head recorded earlier that is no
// longer in it.
func TestVerifyAuditChainNamesAMissingHead(t *testing.T) {
	rq := newReceipts(t)
	ctx := t.Context()
	ran(t, rq, alice, "s-alice", "one")
	ran(t, rq, alice, "s-alice", "two")
	ok := rq.VerifyAuditChain(ctx, &termdv1.VerifyAuditChainRequest{})
	if !ok.Ok || ok.Checked != 2 || ok.HeadSeq != 2 || ok.HeadHash == "" {
		t.Fatalf("a whole chain: %+v", ok)
	}
	again := rq.VerifyAuditChain(ctx, &termdv1.VerifyAuditChainRequest{ExpectSeq: ok.HeadSeq, ExpectHash: ok.HeadHash})
	if !again.Ok {
		t.Fatalf("the recorded head is in the chain: %+v", again)
	}
	gone := rq.VerifyAuditChain(ctx, &termdv1.VerifyAuditChainRequest{ExpectSeq: 5})
	if gone.Ok || gone.BadSeq != 5 || !strings.Contains(gone.Problem, "receipts were removed from the end") {
		t.Fatalf("a head past the chain's end: %+v", gone)
	}
	wrong := rq.VerifyAuditChain(ctx, &termdv1.VerifyAuditChainRequest{ExpectSeq: 1, ExpectHash: "0"})
	if wrong.Ok || !strings.Contains(wrong.Problem, "the chain was rewritten") {
		t.Fatalf("a head with another hash: %+v", wrong)
	}
}
