package e2e

import (
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// TestShareReceiptOnFinalEvent: the share form ExecuteAndWait puts on its
// last message (share_receipt, what the MCP bridge asks for) is signed from
// the receipt as the store sealed it, not read back; it must be exactly
// ExportReceipt's share form of the stored receipt, verify offline with the
// public key, and hide what a share export hides.
func TestShareReceiptOnFinalEvent(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	s, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := d.Client.Receipts.GetPublicKey(ctxT(t), &termdv1.GetPublicKeyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var pem string
	for _, k := range keys.Keys {
		pem += k.Pem
	}
	pubs, err := receipt.ParsePublicKeyFile([]byte(pem))
	if err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"echo", "share-me-not"}, // stdout
		{"ls", "no-such-file"},   // stderr, a failure
		{"true"},
	} {
		p := plan(t, d.Client, s.Session.Id, argv...)
		st, err := d.Client.Executions.ExecuteAndWait(ctxT(t), &termdv1.ExecuteAndWaitRequest{PlanId: p.Id, ShareReceipt: true})
		if err != nil {
			t.Fatal(err)
		}
		var shared, id string
		for {
			m, err := st.Recv()
			if err != nil {
				break
			}
			if m.Event.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
				shared, id = m.ShareReceiptJson, m.Event.GetReceipt().GetId()
			} else if m.ShareReceiptJson != "" {
				t.Fatalf("%v: a share form on a %v event", argv, m.Event.Kind)
			}
		}
		if shared == "" || id == "" {
			t.Fatalf("%v: no share form on the final event (receipt %q)", argv, id)
		}
		exp, err := d.Client.Receipts.ExportReceipt(ctxT(t), &termdv1.ExportReceiptRequest{ReceiptId: id, Share: true})
		if err != nil {
			t.Fatal(err)
		}
		if shared != exp.ReceiptJson {
			t.Fatalf("%v: the share form on the final event differs from ExportReceipt's:\n%s\n--- export:\n%s", argv, shared, exp.ReceiptJson)
		}
		r, err := receipt.VerifyJSON([]byte(shared), pubs)
		if err != nil {
			t.Fatalf("%v: the share form does not verify offline: %v", argv, err)
		}
		if !r.SharingRedacted || r.ID != id || r.Seq == 0 || r.Stdout != "[REDACTED FOR SHARING]" || r.Command != "[REDACTED FOR SHARING]" || strings.Contains(shared, "share-me-not") {
			t.Fatalf("%v: not a share form of receipt %s: %s", argv, id, shared)
		}
		if again, err := d.Client.Receipts.ExportReceipt(ctxT(t), &termdv1.ExportReceiptRequest{ReceiptId: id, Share: true}); err != nil || again.ReceiptJson != shared {
			t.Fatalf("%v: a second export differs (%v)", argv, err)
		}
	}
}
