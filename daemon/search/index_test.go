package search

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/receipt"
)

type fixture struct {
	t     testing.TB
	mu    sync.Mutex // start
	dir   string
	keys  *receiptstore.Keys
	store *receiptstore.Store
	idx   *Index
	start time.Time
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	keys, err := receiptstore.LoadOrCreateKeys(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := receiptstore.Open(filepath.Join(dir, "receipts.db"), keys)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, keys: keys, store: st, start: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	f.open()
	t.Cleanup(func() {
		f.idx.Close()
		st.Close()
	})
	return f
}

func (f *fixture) open() {
	f.idx = Open(filepath.Join(f.dir, "search.db"), f.store, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// add appends a receipt whose command and output are given.
func (f *fixture) add(requester, command, stdout string) string {
	f.t.Helper()
	f.mu.Lock()
	f.start = f.start.Add(time.Minute)
	start := f.start
	f.mu.Unlock()
	exit := 0
	r := &receipt.Receipt{
		SchemaVersion: receipt.SchemaVersion,
		PlanID:        "plan-" + command, SessionID: "s-" + requester,
		RequestHash: "4b227777d4dd1fc61c6f884f48641d02b4d121d3fd328cb08b5531fcacdabf8a",
		Requester:   receipt.Principal{Kind: "unix", ID: requester, Role: "agent"},
		Command:     command, CommandSHA256: f.keys.Digest([]byte(command)),
		BinaryPath: "/usr/bin/echo", BinarySHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Cwd: "/w", Mode: "confirm", Risk: "low", Decision: "allow",
		Policy:    receipt.Policy{Allowed: true, Risk: "low", Reasons: []string{"prints text"}, Argv: []string{"echo"}, Version: "v1"},
		Limits:    receipt.Limits{TimeoutMs: 1000, MaxOutputBytes: 1 << 20},
		Status:    receipt.StatusSucceeded,
		StartedAt: start, FinishedAt: start, ExitCode: &exit,
		Stdout: stdout, StdoutBytes: int64(len(stdout)),
		StdoutDigest: f.keys.Digest([]byte(stdout)), StderrDigest: f.keys.Digest(nil),
	}
	stored, err := f.store.Append(r)
	if err != nil {
		f.t.Fatal(err)
	}
	return stored.ID
}

func (f *fixture) search(q Query) []string {
	f.t.Helper()
	if _, err := f.idx.CatchUp(context.Background(), time.Time{}); err != nil {
		f.t.Fatal(err)
	}
	p, err := f.idx.Search(q)
	if err != nil {
		f.t.Fatalf("search %q: %v", q.Phrase, err)
	}
	var ids []string
	for _, m := range p.Matches {
		ids = append(ids, m.ID)
	}
	return ids
}

func TestPhraseIsLiteral(t *testing.T) {
	f := newFixture(t)
	or := f.add("uid:1", "echo 'a OR b'", "a OR b\n")
	a := f.add("uid:1", "echo a", "a\n")
	b := f.add("uid:1", "echo b", "just b here\n")
	star := f.add("uid:1", "echo '*'", "*\n")
	force := f.add("uid:1", "git push --force", "forced update\n")
	near := f.add("uid:1", "echo NEAR", `say "NEAR(x y)" and -x ^y col:z`+"\n")
	for _, c := range []struct {
		phrase string
		want   []string
	}{
		{"a OR b", []string{or}},
		{"*", []string{star}},
		{"--force", []string{force}},
		{`"NEAR(x y)"`, []string{near}},
		{"-x ^y", []string{near}},
		{"col:z", []string{near}},
		{"A or B", []string{or}}, // case is folded
		{"b", []string{b, or}},
		{"zzz", nil},
	} {
		if got := f.search(Query{Phrase: c.phrase}); !slices.Equal(got, c.want) {
			t.Errorf("search %q = %v, want %v", c.phrase, got, c.want)
		}
	}
	_ = a
	for _, bad := range []string{"", "   "} {
		if _, err := f.idx.Search(Query{Phrase: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("search %q: %v, want an invalid-search error", bad, err)
		}
	}
}

func TestPagesAndFilters(t *testing.T) {
	f := newFixture(t)
	var mine []string
	for i := 0; i < 5; i++ {
		mine = append([]string{f.add("uid:1", "make test", "ok all good")}, mine...)
		f.add("uid:2", "make test", "ok all good")
	}
	got := f.search(Query{Phrase: "all good", Requester: "uid:1"})
	if !slices.Equal(got, mine) {
		t.Fatalf("uid:1's hits = %v, want %v (newest first)", got, mine)
	}
	p, err := f.idx.Search(Query{Phrase: "all good", Requester: "uid:1", Limit: 2})
	if err != nil || len(p.Matches) != 2 || p.NextPageToken == "" {
		t.Fatalf("first page: %+v %v", p, err)
	}
	var paged []string
	for tok := ""; ; {
		p, err := f.idx.Search(Query{Phrase: "all good", Requester: "uid:1", Limit: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Matches {
			paged = append(paged, m.ID)
		}
		if tok = p.NextPageToken; tok == "" {
			break
		}
	}
	if !slices.Equal(paged, mine) {
		t.Fatalf("paged = %v, want %v", paged, mine)
	}
	if _, err := f.idx.Search(Query{Phrase: "x", PageToken: "bogus"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad page token: %v", err)
	}
	if _, err := f.idx.Search(Query{Phrase: "x", Limit: 101}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("limit 101: %v", err)
	}
}

func TestRebuildAndRecovery(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 300; i++ { // more than one catch-up batch
		f.add("uid:1", "go test ./...", "PASS\n")
	}
	f.add("uid:1", "git log", "migrations applied\n")
	before := f.search(Query{Phrase: "PASS", Limit: 100})
	n, err := f.idx.Rebuild(context.Background())
	if err != nil || n != 301 {
		t.Fatalf("rebuild: %d %v, want 301 receipts", n, err)
	}
	if after := f.search(Query{Phrase: "PASS", Limit: 100}); !slices.Equal(before, after) {
		t.Fatal("results differ after a rebuild")
	}
	// A deleted index file is built again at the next open.
	f.idx.Close()
	os.Remove(filepath.Join(f.dir, "search.db"))
	f.open()
	if after := f.search(Query{Phrase: "PASS", Limit: 100}); !slices.Equal(before, after) {
		t.Fatal("results differ after deleting the index")
	}
	// So is a corrupt one.
	f.idx.Close()
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(f.dir, "search.db") + s)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "search.db"), []byte("this is not a database, not at all, really not"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.open()
	if after := f.search(Query{Phrase: "PASS", Limit: 100}); !slices.Equal(before, after) {
		t.Fatal("results differ after corrupting the index")
	}
	if fi, err := os.Stat(filepath.Join(f.dir, "search.db")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("search.db mode: %v %v, want 0600", fi.Mode(), err)
	}
	// Pruned receipts leave the index.
	if _, err := f.store.Prune(f.start, "uid:0"); err != nil {
		t.Fatal(err)
	}
	if got := f.search(Query{Phrase: "PASS"}); len(got) != 0 {
		t.Fatalf("pruned receipts still found: %d", len(got))
	}
	if got := f.search(Query{Phrase: "migrations"}); len(got) != 1 {
		t.Fatalf("the kept receipt: %v", got)
	}
}

func TestFollowsAppends(t *testing.T) {
	f := newFixture(t)
	id := f.add("uid:1", "echo hi", "background indexing\n")
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := f.idx.Search(Query{Phrase: "background indexing"})
		if err == nil && len(p.Matches) == 1 && p.Matches[0].ID == id {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the index did not pick up a new receipt by itself: %+v %v", p, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSnippet(t *testing.T) {
	out := "line one\n" + string(make([]byte, 0)) + "the migrations ran: 12 applied\nline three"
	field, s, ok := Snippet(map[string]string{FieldCommand: "make migrate", FieldOutput: out}, "MIGRATIONS ran")
	if !ok || field != FieldOutput || s != "line one the migrations ran: 12 applied line three" {
		t.Fatalf("snippet = %q %q %v", field, s, ok)
	}
}

// TestFollowBatchesCommits: receipts committed back to back are indexed by
// one background catch-up after the commits pause (not one per commit), and
// a search that catches up first finds the newest at once.
func TestFollowBatchesCommits(t *testing.T) {
	f := newFixture(t)
	time.Sleep(2 * settle) // the catch-up at open
	before := f.idx.rounds.Load()
	const n = 20
	var last string
	for i := range n {
		last = f.add("uid:1", "echo batch", fmt.Sprintf("batched receipt %d\n", i))
		time.Sleep(settle / 10)
	}
	// Right after the last commit nothing is indexed in the background yet,
	// and a search that catches up first sees everything.
	if behind, err := f.idx.CatchUp(context.Background(), time.Now().Add(2*time.Second)); err != nil || behind {
		t.Fatalf("catch up: behind %v, %v", behind, err)
	}
	p, err := f.idx.Search(Query{Phrase: "batched receipt 19"})
	if err != nil || len(p.Matches) != 1 || p.Matches[0].ID != last {
		t.Fatalf("the newest receipt after catching up: %+v %v", p, err)
	}
	time.Sleep(maxDelay + 2*settle)
	if got := f.idx.rounds.Load() - before; got < 1 || got > 3 {
		t.Fatalf("%d commits took %d background catch-ups, want 1 to 3 (one per pause or per %v)", n, got, maxDelay)
	}
}
