package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/termd/termd/internal/harness"
)

const searchSecret = "s3cr3t-search-9d2f7c41"

// Two agents (nobody and uid 65533) and root as an operator; a configured
// secret the redactor removes.
func startSearch(t *testing.T) *harness.Daemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run termctl as two other users")
	}
	sec := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(sec, []byte(searchSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return harness.Start(t, harness.Options{Config: "socket_group: \"65534\"\nsecrets: [" + sec + "]\nroles:\n  agents:\n    uids: [65534, 65533]\n"})
}

var agentB = &syscall.Credential{Uid: 65533, Gid: 65534}

type searchJSON struct {
	Hits []struct {
		Receipt struct {
			ID        string `json:"id"`
			Command   string `json:"command"`
			Requester string `json:"requester"`
			SessionID string `json:"session_id"`
		} `json:"receipt"`
		Field   string `json:"field"`
		Snippet string `json:"snippet"`
	} `json:"hits"`
	NextPageToken string `json:"next_page_token"`
}

func (s searchJSON) ids() []string {
	var ids []string
	for _, h := range s.Hits {
		ids = append(ids, h.Receipt.ID)
	}
	return ids
}

// searchAs runs `termctl receipts search -o json` as cred (nil: root).
func searchAs(t *testing.T, d *harness.Daemon, cred *syscall.Credential, args ...string) searchJSON {
	t.Helper()
	args = append([]string{"receipts", "search", "-o", "json", "--limit", "100"}, args...)
	out, errOut, code := d.RunAs(cred, "termctl", nil, args...)
	if code != 0 {
		t.Fatalf("termctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return decode[searchJSON](t, out)
}

func runAs(t *testing.T, d *harness.Daemon, cred *syscall.Credential, argv ...string) {
	t.Helper()
	out, errOut, code := d.RunAs(cred, "termctl", nil, append([]string{"run", "--"}, argv...)...)
	if code != 0 {
		t.Fatalf("termctl run %v: exit %d\n%s%s", argv, code, out, errOut)
	}
}

// storedReceipt is what the test reads of every receipt to know which
// ones hold a phrase.
type storedReceipt struct {
	ID      string `json:"id"`
	Command string `json:"command"`
	Stdout  string `json:"stdout"`
	Stderr  string `json:"stderr"`
	Detail  string `json:"detail"`
	Policy  struct {
		Reasons []string `json:"reasons"`
	} `json:"policy"`
}

// holding is, newest first, every receipt whose command, reasons or output
// hold phrase as literal text (ASCII case folded), read from the receipts.
func holding(t *testing.T, d *harness.Daemon, phrase string) []string {
	t.Helper()
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(ok(t, d, "receipts", "export", "--all")), "\n") {
		var r storedReceipt
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		text := strings.ToLower(strings.Join(append([]string{r.Command, r.Stdout, r.Stderr, r.Detail}, r.Policy.Reasons...), "\n"))
		if strings.Contains(text, strings.ToLower(phrase)) {
			ids = append([]string{r.ID}, ids...)
		}
	}
	return ids
}

func TestReceiptsSearch(t *testing.T) {
	d := startSearch(t)
	seedSearchReceipts(t, d)

	// Found by a phrase from the redacted output, by each agent only its
	// own, by the operator both.
	a := searchAs(t, d, harness.Nobody, "migrations applied")
	b := searchAs(t, d, agentB, "migrations applied")
	all := searchAs(t, d, nil, "migrations applied")
	if len(a.Hits) != 1 || a.Hits[0].Receipt.Requester != "nobody (uid:65534)" && !strings.Contains(a.Hits[0].Receipt.Requester, "65534") {
		t.Fatalf("agent A's search: %+v", a)
	}
	if a.Hits[0].Field != "output" || !strings.Contains(a.Hits[0].Snippet, "migrations applied: 12") {
		t.Fatalf("agent A's hit should show its output: %+v", a.Hits[0])
	}
	if len(b.Hits) != 1 || !strings.Contains(b.Hits[0].Snippet, "migrations applied: 7") {
		t.Fatalf("agent B's search: %+v", b)
	}
	if !slices.Equal(all.ids(), []string{b.Hits[0].Receipt.ID, a.Hits[0].Receipt.ID}) {
		t.Fatalf("the operator's search should find both, newest first: %+v", all)
	}
	// Another agent's receipts are "no match", asked for by principal or
	// by session alike, as for something that does not exist.
	for _, args := range [][]string{
		{"migrations applied", "--principal", "uid:65533"},
		{"migrations applied", "--session", b.Hits[0].Receipt.SessionID},
		{"migrations applied", "--session", "00000000-0000-0000-0000-000000000000"},
		{"7"},
	} {
		if got := searchAs(t, d, harness.Nobody, args...); len(got.Hits) != 0 || got.NextPageToken != "" {
			t.Fatalf("agent A's search %v found another's receipt: %+v", args, got)
		}
	}
	out, _, _ := d.RunAs(harness.Nobody, "termctl", nil, "receipts", "search", "7")
	if out != "no receipts match\n" {
		t.Fatalf("agent A's plain search for B's text: %q", out)
	}

	// Search syntax is text.
	for _, phrase := range []string{"a OR b", "*", `"a`, "-"} {
		want := holding(t, d, phrase)
		got := searchAs(t, d, nil, "--", phrase).ids()
		if !slices.Equal(got, want) {
			t.Fatalf("search %q = %v, want the receipts holding it: %v", phrase, got, want)
		}
	}
	if got := searchAs(t, d, nil, "a OR b").Hits; len(got) != 1 || got[0].Receipt.Command != "echo 'a OR b'" {
		t.Fatalf(`"a OR b" should find exactly the receipt holding that text: %+v`, got)
	}
	if got := searchAs(t, d, nil, "*").Hits; len(got) != 1 || got[0].Receipt.Command != "echo '*'" {
		t.Fatalf(`"*" should find exactly the receipt holding a star: %+v`, got)
	}

	// The secret's value is not in any receipt, so not findable.
	for _, phrase := range []string{searchSecret, searchSecret[4:16], "token=" + searchSecret[:8]} {
		if got := searchAs(t, d, nil, phrase); len(got.Hits) != 0 {
			t.Fatalf("the redacted secret was found by %q: %+v", phrase, got)
		}
	}
	if got := searchAs(t, d, nil, "token=[REDACTED]"); len(got.Hits) != 1 {
		t.Fatalf("the redacted text itself should be found: %+v", got)
	}

	// An empty phrase is an error naming the fix.
	_, errOut := expect(t, d, 1, "receipts", "search", " ")
	if !strings.Contains(errOut, "empty") || !strings.Contains(errOut, `termctl receipts search "`) {
		t.Fatalf("empty phrase: %q", errOut)
	}
	expect(t, d, 2, "receipts", "search")

	// Pages: newest first, bounded, with a token for the next.
	p1 := decode[searchJSON](t, ok(t, d, "receipts", "search", "-o", "json", "--limit", "2", "echo"))
	p2 := decode[searchJSON](t, ok(t, d, "receipts", "search", "-o", "json", "--limit", "100", "--page-token", p1.NextPageToken, "echo"))
	if len(p1.Hits) != 2 || p1.NextPageToken == "" || !slices.Equal(append(p1.ids(), p2.ids()...), holding(t, d, "echo")) {
		t.Fatalf("pages: %+v then %+v", p1, p2)
	}

	checkSearchIndexIsDisposable(t, d)
	// The chain is untouched by all of it.
	ok(t, d, "audit", "verify")
}

// seedSearchReceipts runs the commands whose receipts the searches find:
// two agents' outputs, phrases that look like search syntax, and a secret.
func seedSearchReceipts(t *testing.T, d *harness.Daemon) {
	// The agents' phrases are only in their output (files they print).
	if err := os.Chmod(d.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"a.txt": "migrations applied: 12\n", "b.txt": "migrations applied: 7\n"} {
		if err := os.WriteFile(filepath.Join(d.Workspace, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runAs(t, d, harness.Nobody, "cat", "a.txt")
	runAs(t, d, agentB, "cat", "b.txt")
	runAs(t, d, nil, "echo", "a OR b")
	runAs(t, d, nil, "echo", "a", "b")
	runAs(t, d, nil, "echo", "*")
	runAs(t, d, nil, "echo", "no star here")
	// The secret reaches the output from a file (a secret in argv makes a
	// plan stale at execute: its redacted view differs from the request).
	if err := os.WriteFile(filepath.Join(d.Workspace, "env.txt"), []byte("token="+searchSecret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runAs(t, d, nil, "cat", "env.txt")
}

// checkSearchIndexIsDisposable deletes the index and rebuilds it on request:
// the answers stay the same, and only the operator may rebuild it.
func checkSearchIndexIsDisposable(t *testing.T, d *harness.Daemon) {
	// The index is disposable: deleted (termd rebuilds it at start) or
	// rebuilt on request, the answers are the same.
	before := searchAs(t, d, nil, "echo")
	d.Stop()
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(d.StateDir, "search.db") + s)
	}
	d.Restart()
	if after := searchAs(t, d, nil, "echo"); !slices.Equal(after.ids(), before.ids()) {
		t.Fatalf("after deleting the index: %v, before: %v", after.ids(), before.ids())
	}
	if fi, err := os.Stat(filepath.Join(d.StateDir, "search.db")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("search.db: %v %v, want mode 0600", fi, err)
	}
	n := strings.Count(strings.TrimSpace(ok(t, d, "receipts", "export", "--all")), "\n") + 1
	if out := ok(t, d, "receipts", "reindex"); out != "search index rebuilt: "+itoa(n)+" receipts indexed\n" {
		t.Fatalf("reindex: %q, want %d receipts", out, n)
	}
	if after := searchAs(t, d, nil, "echo"); !slices.Equal(after.ids(), before.ids()) {
		t.Fatalf("after reindex: %v, before: %v", after.ids(), before.ids())
	}
	if _, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "receipts", "reindex"); code == 0 || !strings.Contains(errOut, "operator") {
		t.Fatalf("an agent may not rebuild the index: exit %d %q", code, errOut)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
