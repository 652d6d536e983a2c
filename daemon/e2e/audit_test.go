package e2e

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Removing the newest receipts leaves a valid, shorter chain; a head recorded
// earlier catches it.
func TestRecordedHeadDetectsReceiptsRemovedFromTheEnd(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	for i := 0; i < 3; i++ {
		runToEnd(t, d.Client, plan(t, d.Client, "", "true"))
	}
	v, err := d.Client.Receipts.VerifyAuditChain(ctxT(t), &termdv1.VerifyAuditChainRequest{})
	if err != nil || !v.Ok || v.HeadSeq != 3 || len(v.HeadHash) != 64 {
		t.Fatalf("head after three runs: %v %v", v, err)
	}
	head := v.HeadHash
	d.Stop()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.StateDir, "receipts.db"))
	if err != nil {
		t.Fatal(err)
	}
	// A thorough forger removes the receipt and the intent it closed.
	for _, q := range []string{`DROP TRIGGER receipts_no_delete`, `DROP TRIGGER intents_no_delete`,
		`DELETE FROM intents WHERE execution_id = (SELECT execution_id FROM receipts WHERE seq = 3)`, `DELETE FROM receipts WHERE seq = 3`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	d.Restart()
	v, _ = d.Client.Receipts.VerifyAuditChain(ctxT(t), &termdv1.VerifyAuditChainRequest{})
	if !v.Ok || v.HeadSeq != 2 {
		t.Fatalf("the shortened chain is still valid on its own: %v", v)
	}
	v, _ = d.Client.Receipts.VerifyAuditChain(ctxT(t), &termdv1.VerifyAuditChainRequest{ExpectSeq: 3, ExpectHash: head})
	if v.Ok || v.BadSeq != 3 || !strings.Contains(v.Problem, "removed") {
		t.Fatalf("the recorded head must expose the removal: %v", v)
	}
	out, _, code := d.Run("termctl", "audit", "verify", "--expect", "3:"+head)
	if code != 1 {
		t.Fatalf("termctl audit verify --expect: exit %d\n%s", code, out)
	}
}
