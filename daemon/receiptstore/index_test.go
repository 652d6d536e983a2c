package receiptstore

import (
	"strings"
	"testing"

	"github.com/termd/termd/receipt"
)

// queryPlan is EXPLAIN QUERY PLAN's steps for q, one a line.
func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	return strings.Join(steps, "\n")
}

// TestLookupsUsePartialIndexes: the receipts' plan_id and approver indexes
// hold only the receipts the lookups ask for (an execution's receipt with
// no approver, most of them, is in neither, so its commit writes two pages
// fewer), and every lookup on them still searches an index, never scans
// the receipts: the principal filter, recovery's and prune's joins from an
// intent to its receipt.
func TestLookupsUsePartialIndexes(t *testing.T) {
	s, _, _ := newStore(t)
	principal, args := Filter{Principal: "uid:1"}.query()
	for _, c := range []struct {
		name, q, index string
		args           []any
	}{
		{"principal filter", principal, "receipts_approved_by (approver=?)", args},
		{"prune", `SELECT i.execution_id FROM intents i WHERE EXISTS (SELECT 1 FROM receipts r WHERE r.seq <= ?1
			AND (r.execution_id = i.execution_id OR (r.execution_id = '' AND i.plan_id != '' AND r.plan_id = i.plan_id)))`,
			"receipts_plan_unexecuted (plan_id=?", []any{5}},
		{"recovery", `SELECT 1 FROM intents i WHERE NOT EXISTS (SELECT 1 FROM receipts r WHERE r.execution_id = i.execution_id)
			AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.execution_id = '' AND i.plan_id != '' AND r.plan_id = i.plan_id)`,
			"receipts_plan_unexecuted (plan_id=?)", nil},
	} {
		plan := queryPlan(t, s, c.q, c.args...)
		if !strings.Contains(plan, c.index) || strings.Contains(plan, "SCAN r\n") || strings.HasSuffix(plan, "SCAN r") || strings.Contains(plan, "SCAN receipts") {
			t.Errorf("%s: want a search of %s and no scan of the receipts, the plan is:\n%s", c.name, c.index, plan)
		}
	}
}

// TestOpenReplacesFullIndexes: a store made with the full plan_id and
// approver indexes (and intents_plan) gets the partial ones at Open, and
// the principal filter still finds a receipt by its approver.
func TestOpenReplacesFullIndexes(t *testing.T) {
	s, k, path := newStore(t)
	approved, err := s.Append(sampleReceipt(k, receipt.StatusCancelled, "s")) // approved by uid:1001
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP INDEX receipts_plan_unexecuted`, `DROP INDEX receipts_approved_by`,
		`CREATE INDEX receipts_plan ON receipts(plan_id)`, `CREATE INDEX receipts_approver ON receipts(approver)`,
		`CREATE INDEX intents_plan ON intents(plan_id)`,
	} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s2 := reopenStore(t, s, path, k)
	var names []string
	rows, err := s2.db.Query(`SELECT name FROM sqlite_schema WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	got := strings.Join(names, " ")
	for _, want := range []string{"receipts_plan_unexecuted", "receipts_approved_by"} {
		if !strings.Contains(got, want) {
			t.Errorf("indexes after Open: %s; want %s", got, want)
		}
	}
	for _, gone := range []string{"receipts_plan ", "receipts_approver ", "intents_plan"} {
		if strings.Contains(got+" ", gone) {
			t.Errorf("indexes after Open: %s; want no %s", got, gone)
		}
	}
	list, err := s2.List(Filter{Principal: "uid:1001"})
	if err != nil || len(list) != 1 || list[0].ID != approved.ID {
		t.Fatalf("List by approver after Open: %v, %v", list, err)
	}
}
