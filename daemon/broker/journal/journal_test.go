package journal

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Replay keeps the latest record of each session and plan in the order
// each first appeared, hands grants over as read, and skips what it cannot
// read (an empty line, a torn last line) without failing.
func TestReplayKeepsTheLatestRecordOfEachID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.jsonl")
	lines := []string{
		`{"kind":"session","session":{"id":"s1","label":"first"}}`,
		`{"kind":"plan","plan":{"id":"p2","session_id":"s1"},"request":{"cwd":"/a"}}`,
		`{"kind":"plan","plan":{"id":"p1","session_id":"s1"},"request":{"cwd":"/b"}}`,
		``,
		`{"kind":"grant","grant":{"id":"g1"},"grant_match":{}}`,
		`{"kind":"session","session":{"id":"s1","label":"second"}}`,
		`{"kind":"plan","plan":{"id":"p2","session_id":"s1","state":"PLAN_STATE_EXPIRED"}}`,
		`{"kind":"plan","plan":{"id":"p3","sess`, // torn by a crash
	}
	if err := os.WriteFile(path, []byte(string(bytes.Join(toBytes(lines), []byte("\n")))), 0o600); err != nil {
		t.Fatal(err)
	}
	var grants []string
	rp, err := Replay(path, slog.New(slog.NewTextHandler(io.Discard, nil)), func(r Record) error {
		grants = append(grants, string(r.Grant))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rp.SessionOrder, []string{"s1"}) || rp.Sessions["s1"].Label != "second" {
		t.Errorf("sessions %v, s1 %v", rp.SessionOrder, rp.Sessions["s1"])
	}
	if !slices.Equal(rp.PlanOrder, []string{"p2", "p1"}) || len(rp.Plans["p2"].Request) != 0 || string(rp.Plans["p1"].Request) != `{"cwd":"/b"}` {
		t.Errorf("plans %v: %+v", rp.PlanOrder, rp.Plans)
	}
	if !slices.Equal(grants, []string{`{"id":"g1"}`}) {
		t.Errorf("grants %v", grants)
	}
	if st, _ := os.Stat(path); rp.Bytes != st.Size() {
		t.Errorf("replayed %d bytes of %d", rp.Bytes, st.Size())
	}
	if rp, err := Replay(filepath.Join(t.TempDir(), "none"), nil, nil); err != nil || len(rp.Sessions)+len(rp.Plans) != 0 {
		t.Errorf("no journal: %v, %v", rp, err)
	}
}

func toBytes(ss []string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, []byte(s))
	}
	return out
}

// A record superseded or forgotten is counted dead, a forgotten one is
// not written again, and a compaction leaves the file holding only what it
// emitted, passing its Stall point after the new file is durable.
func TestAppendAndCompactAccountDeadRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.jsonl")
	j := New(path)
	var stalled []string
	j.Stall = func(point string) {
		// The new file is whole and the journal not yet replaced.
		b, err := os.ReadFile(path + ".tmp")
		stalled = append(stalled, point+":"+string(b))
		if _, serr := os.Stat(path); err != nil || (len(stalled) == 1) != os.IsNotExist(serr) {
			t.Errorf("at the stall point: %v, %v", err, serr)
		}
	}
	var a, b, use int64
	var gone bool
	if err := j.Compact(func(emit Emit) error {
		return errors.Join(emit([]byte("a1\n"), &a), emit([]byte("b1\n"), &b))
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stalled, []string{"compact:a1\nb1\n"}) {
		t.Fatalf("stall points %v", stalled)
	}
	if err := j.Append([]byte("a22\n"), true, &a, &use, &gone); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if size, dead, n := j.Stats(); size != 10 || dead != 3 || n != 0 || a != 4 || j.Load(&use) != 1 {
		t.Fatalf("after a superseding record: size %d dead %d compactions %d slot %d use %d", size, dead, n, a, use)
	}
	j.Forget(&a, &use, &gone)
	if err := j.Append([]byte("a333\n"), true, &a, &use, &gone); err != nil {
		t.Fatal(err)
	}
	if size, dead, _ := j.Stats(); size != 10 || dead != 7 || a != 0 || use != -3 || !gone {
		t.Fatalf("after forgetting: size %d dead %d slot %d use %d gone %v", size, dead, a, use, gone)
	}
	if got, _ := os.ReadFile(path); string(got) != "a1\nb1\na22\n" {
		t.Fatalf("the journal holds %q", got)
	}
	if err := j.Compact(func(emit Emit) error { return emit([]byte("b1\n"), &b) }); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if got, _ := os.ReadFile(path); string(got) != "b1\n" {
		t.Fatalf("the compacted journal holds %q", got)
	}
	if !slices.Equal(stalled, []string{"compact:a1\nb1\n", "compact:b1\n"}) {
		t.Fatalf("stall points %q", stalled)
	}
	if size, dead, n := j.Stats(); size != 3 || dead != 0 || n != 1 {
		t.Fatalf("after compacting: size %d dead %d compactions %d", size, dead, n)
	}
}
