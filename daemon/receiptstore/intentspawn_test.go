package receiptstore

import (
	"database/sql"
	"testing"
)

// A store made before intent_spawns had start_ticks opens: the column is
// added, its old rows read as start 0 (not known), and new rows keep theirs.
func TestIntentSpawnsStartTicksMigration(t *testing.T) {
	s, k, path := newStore(t)
	for _, id := range []string{"old", "new"} {
		if err := s.AppendIntent(Intent{ExecutionID: id, PlanID: "p-" + id, SessionID: "s1"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE intent_spawns DROP COLUMN start_ticks`, // the table as an older termd made it
		`INSERT INTO intent_spawns(execution_id, pid, pgid, cgroup_path, at_ns) VALUES ('old', 4242, 4242, '', 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	db.Close()
	s2, err := Open(path, k)
	if err != nil {
		t.Fatalf("a store without intent_spawns.start_ticks must open: %v", err)
	}
	defer s2.Close()
	if err := s2.RecordSpawn("new", 4343, 4343, 987654, ""); err != nil {
		t.Fatal(err)
	}
	open, err := s2.RecoverIntents()
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 2 || open[0].Pid != 4242 || open[0].PidStart != 0 || open[1].Pid != 4343 || open[1].PidStart != 987654 {
		t.Fatalf("recovered intents: %+v", open)
	}
}
