package receiptstore

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/receipt"
)

func TestEveryFinalStatusYieldsValidSignedReceipt(t *testing.T) {
	s, k, _ := newStore(t)
	pubOnly, err := receipt.ParsePublicKeyFile(k.PublicKeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range receipt.Statuses {
		got, err := s.Append(sampleReceipt(k, st, "sess-1"))
		if err != nil {
			t.Fatalf("%s: append: %v", st, err)
		}
		body, err := receipt.CanonicalBytes(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := receipt.ValidateSchema(body); err != nil {
			t.Errorf("%s: schema: %v", st, err)
		}
		if err := receipt.Verify(got, k.PublicKeys(), k.HMACKey()); err != nil {
			t.Errorf("%s: verify with both keys: %v", st, err)
		}
		if _, err := receipt.VerifyJSON(body, pubOnly); err != nil {
			t.Errorf("%s: offline verify: %v", st, err)
		}
		if err := s.VerifyReceipt(got); err != nil {
			t.Errorf("%s: verify against store: %v", st, err)
		}
		if got.Status != st || got.KeyID != k.KeyID() || len(got.Signature) != 64 || len(got.SignatureEd25519) != 128 {
			t.Errorf("%s: unexpected receipt %+v", st, got)
		}
	}
	n, _ := s.Count()
	if n != int64(len(receipt.Statuses)) {
		t.Fatalf("count = %d", n)
	}
	checked, bad, err := s.VerifyChain()
	if err != nil || bad != 0 || checked != len(receipt.Statuses) {
		t.Fatalf("VerifyChain = %d, %d, %v", checked, bad, err)
	}
}

func TestSchemaRejectsBadReceipts(t *testing.T) {
	k := newKeys(t)
	mutate := map[string]func(m map[string]any){
		"unknown status":        func(m map[string]any) { m["status"] = "exploded" },
		"unknown field":         func(m map[string]any) { m["extra"] = 1 },
		"missing signature":     func(m map[string]any) { delete(m, "signature") },
		"uppercase hex hmac":    func(m map[string]any) { m["signature"] = strings.ToUpper(m["signature"].(string)) },
		"succeeded nonzero":     func(m map[string]any) { m["exit_code"] = 3 },
		"bad time":              func(m map[string]any) { m["started_at"] = "yesterday" },
		"wrong version":         func(m map[string]any) { m["schema_version"] = "0.9" },
		"approved w/o approver": func(m map[string]any) { m["approved"] = true },
		"unknown role":          func(m map[string]any) { m["requester"].(map[string]any)["role"] = "god" },
	}
	base := sampleReceipt(k, receipt.StatusSucceeded, "s")
	base.ID, base.Seq, base.PrevHash = "r1", 1, receipt.GenesisHash
	if err := k.Sign(base); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(base)
	if err := receipt.ValidateSchema(raw); err != nil {
		t.Fatalf("base receipt invalid: %v", err)
	}
	for name, fn := range mutate {
		var m map[string]any
		json.Unmarshal(raw, &m)
		fn(m)
		b, _ := json.Marshal(m)
		if err := receipt.ValidateSchema(b); err == nil {
			t.Errorf("%s: schema accepted it", name)
		}
	}
}

// Someone verifies the wrong file (a plan, an execution, a listing): one
// line that says what it is not and how to get a receipt, not a schema dump.
func TestNotAReceiptSaysSoInOneLine(t *testing.T) {
	for doc, want := range map[string]string{
		`{"id":"p1","state":"PLAN_STATE_READY","decision":{}}`: "no schema_version member",
		`[{"schema_version":"1.0"}]`:                           "JSON array",
		`{"schema_version":"2.0"}`:                             "schema_version 2.0 is not supported",
	} {
		err := receipt.ValidateSchema([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v (want one line with %q)", doc, err, want)
		}
	}
}

func TestSignatureCoversEveryField(t *testing.T) {
	k := newKeys(t)
	r := sampleReceipt(k, receipt.StatusFailed, "s")
	r.ID, r.Seq, r.PrevHash = "r1", 1, receipt.GenesisHash
	if err := k.Sign(r); err != nil {
		t.Fatal(err)
	}
	// HMAC is over the JCS bytes without the two signature members.
	msg, _ := receipt.SigningBytes(r)
	if bytes.Contains(msg, []byte(`"signature"`)) || !bytes.Contains(msg, []byte(`"key_id"`)) {
		t.Fatalf("signing bytes: %s", msg)
	}
	m := hmac.New(sha256.New, k.HMACKey())
	m.Write(msg)
	if r.Signature != hex.EncodeToString(m.Sum(nil)) {
		t.Fatal("signature is not HMAC-SHA256 over the canonical form")
	}
	edits := []func(*receipt.Receipt){
		func(c *receipt.Receipt) { c.Command += " -v" },
		func(c *receipt.Receipt) { c.Seq++ },
		func(c *receipt.Receipt) { c.PrevHash = strings.Repeat("1", 64) },
		func(c *receipt.Receipt) { c.ExitCode = intp(0) },
		func(c *receipt.Receipt) { c.Policy.Argv[0] = "rm" },
		func(c *receipt.Receipt) { c.FinishedAt = c.FinishedAt.Add(time.Nanosecond) },
		func(c *receipt.Receipt) { c.Approver = &receipt.Principal{Kind: "unix", ID: "x", Role: "operator"} },
	}
	for i, e := range edits {
		c := r.Clone()
		e(c)
		if err := receipt.Verify(c, k.PublicKeys(), nil); err == nil {
			t.Errorf("edit %d not detected by Ed25519", i)
		}
	}
}

func TestOfflineVerifyWithOnlyPublicKey(t *testing.T) {
	s, k, _ := newStore(t)
	got, err := s.Append(sampleReceipt(k, receipt.StatusSucceeded, "s"))
	if err != nil {
		t.Fatal(err)
	}
	var jsonl bytes.Buffer
	if err := s.ExportJSONL(&jsonl, Filter{Limit: -1}); err != nil {
		t.Fatal(err)
	}
	line := bytes.TrimSpace(jsonl.Bytes())

	// Both public-key file formats, with nothing else of the daemon's.
	dir := t.TempDir()
	pemPath := filepath.Join(dir, "pub.pem")
	os.WriteFile(pemPath, k.PublicKeyPEM(), 0o644)
	jsonPath := filepath.Join(dir, "pub.json")
	os.WriteFile(jsonPath, receipt.PublicKeyJSON(k.PublicKeys()), 0o644)
	for _, p := range []string{pemPath, jsonPath} {
		data, _ := os.ReadFile(p)
		pubs, err := receipt.ParsePublicKeyFile(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		r, err := receipt.VerifyJSON(line, pubs)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r.ID != got.ID || r.Seq != 1 {
			t.Fatalf("decoded %+v", r)
		}
	}

	pubs := k.PublicKeys()
	// Another daemon's key does not verify it.
	other := newKeys(t)
	if _, err := receipt.VerifyJSON(line, other.PublicKeys()); err == nil {
		t.Fatal("verified with a foreign key")
	}
	// A key file that lies about the key id is refused.
	var entries []map[string]string
	json.Unmarshal(receipt.PublicKeyJSON(other.PublicKeys()), &entries)
	entries[0]["key_id"] = k.KeyID()
	lie, _ := json.Marshal(entries)
	if _, err := receipt.ParsePublicKeyFile(lie); err == nil {
		t.Fatal("accepted a key file whose key_id does not match the key")
	}
	// Whitespace and member order do not matter (JCS); content does.
	var m map[string]any
	json.Unmarshal(line, &m)
	pretty, _ := json.MarshalIndent(m, "", "   ")
	if _, err := receipt.VerifyJSON(pretty, pubs); err != nil {
		t.Fatalf("re-indented receipt: %v", err)
	}
	m["stdout"] = "something else\n"
	changed, _ := json.Marshal(m)
	if _, err := receipt.VerifyJSON(changed, pubs); err == nil {
		t.Fatal("changed stdout verified")
	}
	// A member the struct does not know is not silently ignored.
	sneaky := append(bytes.TrimSuffix(line, []byte("}")), []byte(`,"zz":1}`)...)
	if _, err := receipt.VerifyJSON(sneaky, pubs); err == nil {
		t.Fatal("extra member verified")
	}
}

func TestKeyRotationKeepsOldReceiptsVerifiable(t *testing.T) {
	s, k, _ := newStore(t)
	old, err := s.Append(sampleReceipt(k, receipt.StatusSucceeded, "s"))
	if err != nil {
		t.Fatal(err)
	}
	oldID := k.KeyID()
	if err := k.Rotate(); err != nil {
		t.Fatal(err)
	}
	if k.KeyID() == oldID {
		t.Fatal("rotate kept the key id")
	}
	newer, err := s.Append(sampleReceipt(k, receipt.StatusFailed, "s"))
	if err != nil {
		t.Fatal(err)
	}
	if newer.KeyID != k.KeyID() || old.KeyID != oldID {
		t.Fatal("key ids not as expected")
	}
	// Reload from disk: the old public key is still known.
	k2, err := LoadOrCreateKeys(k.dir)
	if err != nil {
		t.Fatal(err)
	}
	if k2.KeyID() != k.KeyID() || len(k2.PublicKeys()) != 2 {
		t.Fatalf("reloaded keys: id %s, %d public keys", k2.KeyID(), len(k2.PublicKeys()))
	}
	pubs, err := receipt.ParsePublicKeyFile(k2.PublicKeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*receipt.Receipt{old, newer} {
		if err := receipt.Verify(r, pubs, k2.HMACKey()); err != nil {
			t.Errorf("seq %d after rotation: %v", r.Seq, err)
		}
	}
	if _, bad, err := s.VerifyChain(); err != nil || bad != 0 {
		t.Fatalf("chain after rotation: %d %v", bad, err)
	}
}

func TestKeysPersistedAndPrivateKeyPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	k, err := LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ed25519KeyFile, hmacKeyFile, digestKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", f, fi.Mode().Perm())
		}
	}
	if bytes.Equal(k.hmacKey, k.digKey) {
		t.Fatal("HMAC and digest keys are the same")
	}
	k2, err := LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k2.KeyID() != k.KeyID() || !bytes.Equal(k2.HMACKey(), k.HMACKey()) || k2.Digest([]byte("x")) != k.Digest([]byte("x")) {
		t.Fatal("keys not persisted across restarts")
	}
	for _, f := range []string{ed25519KeyFile, hmacKeyFile, digestKeyFile} {
		for _, mode := range []os.FileMode{0o640, 0o604, 0o660} {
			p := filepath.Join(dir, f)
			os.Chmod(p, mode)
			_, err := LoadOrCreateKeys(dir)
			if err == nil || !strings.Contains(err.Error(), "chmod 600") {
				t.Errorf("%s with mode %04o: err = %v, want refusal", f, mode, err)
			}
			os.Chmod(p, 0o600)
		}
	}
	if _, err := LoadOrCreateKeys(dir); err != nil {
		t.Fatalf("after restoring 0600: %v", err)
	}
}

func TestDigestIsKeyed(t *testing.T) {
	k := newKeys(t)
	other := newKeys(t)
	data := []byte("hunter2")
	plain := sha256.Sum256(data)
	d := k.Digest(data)
	if d == hex.EncodeToString(plain[:]) {
		t.Fatal("digest is a plain SHA-256")
	}
	if d == other.Digest(data) {
		t.Fatal("digest does not depend on the key")
	}
	h := k.NewDigest()
	h.Write([]byte("hun"))
	h.Write([]byte("ter2"))
	if hex.EncodeToString(h.Sum(nil)) != d {
		t.Fatal("streaming digest differs from Digest")
	}
	m := hmac.New(sha256.New, k.HMACKey())
	m.Write(data)
	if hex.EncodeToString(m.Sum(nil)) == d {
		t.Fatal("digest uses the signing key")
	}
}

func TestShareExport(t *testing.T) {
	s, k, _ := newStore(t)
	d := sampleReceipt(k, receipt.StatusFailed, "s")
	d.Command = "deploy --target prod-db-7"
	d.Cwd = "/srv/acme/secret-project"
	d.Policy.Argv = []string{"deploy", "--target", "prod-db-7"}
	d.Stdout = "connecting to prod-db-7\n"
	d.Stderr = "error at /srv/acme/secret-project/main.go\n"
	d.Policy.Reasons = []string{"write to /srv/acme/secret-project/prod-db-7.conf needs approval"}
	d.Detail = "exit status 1 from deploy prod-db-7"
	stored, err := s.Append(d)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := ShareExport(stored, k)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := receipt.CanonicalBytes(sh)
	for _, leak := range []string{"prod-db-7", "secret-project", "deploy", "connecting"} {
		if bytes.Contains(body, []byte(leak)) {
			t.Errorf("share export contains %q: %s", leak, body)
		}
	}
	if !sh.SharingRedacted || sh.Command != SharingMarker || sh.Cwd != SharingMarker ||
		sh.Stdout != SharingMarker || sh.Stderr != SharingMarker || len(sh.Policy.Argv) != 1 || sh.Policy.Argv[0] != SharingMarker {
		t.Fatalf("share export fields: %+v", sh)
	}
	pubs, _ := receipt.ParsePublicKeyFile(k.PublicKeyPEM())
	if _, err := receipt.VerifyJSON(body, pubs); err != nil {
		t.Fatalf("share export does not verify offline: %v", err)
	}
	if err := s.VerifyReceipt(sh); err != nil {
		t.Fatalf("share export does not verify against the store: %v", err)
	}
	// The original is untouched.
	if stored.Command != d.Command || stored.SharingRedacted {
		t.Fatal("ShareExport modified its input")
	}
	// Only a valid signed receipt can be exported.
	forged := stored.Clone()
	forged.ExitCode = intp(0)
	forged.Status = receipt.StatusSucceeded
	if _, err := ShareExport(forged, k); err == nil {
		t.Fatal("exported a receipt whose signature does not verify")
	}
	unsigned := sampleReceipt(k, receipt.StatusSucceeded, "s")
	if _, err := ShareExport(unsigned, k); err == nil {
		t.Fatal("exported an unsigned receipt")
	}
	// A share export cannot enter the chain.
	if _, err := s.Append(sh); err == nil {
		t.Fatal("store accepted a share export")
	}
}

func TestIntentsAndOutcomeUnknown(t *testing.T) {
	s, k, path := newStore(t)
	draft := sampleReceipt(k, receipt.StatusSucceeded, "s1")
	for _, id := range []string{"e1", "e2", "e3"} {
		d := draft.Clone()
		d.ExecutionID = id
		if err := s.AppendIntent(Intent{ExecutionID: id, PlanID: "p-" + id, SessionID: "s1", Receipt: d}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendIntent(Intent{ExecutionID: "e1"}); err == nil {
		t.Fatal("duplicate intent accepted")
	}
	if err := s.RecordSpawn("e2", 4242, 4242, 777, "/sys/fs/cgroup/termd/e2"); err != nil {
		t.Fatal(err)
	}
	final := draft.Clone()
	final.ExecutionID, final.PlanID = "e1", "p-e1"
	final.ExitCode = intp(0)
	if _, err := s.Append(final); err != nil {
		t.Fatal(err)
	}
	// A decision receipt without execution id closes by plan id.
	denied := sampleReceipt(k, receipt.StatusCancelled, "s1")
	denied.ExecutionID, denied.PlanID = "", "p-e3"
	if _, err := s.Append(denied); err != nil {
		t.Fatal(err)
	}
	s2 := reopenStore(t, s, path, k) // "Restart".
	open, err := s2.RecoverIntents()
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0].ExecutionID != "e2" || open[0].Pid != 4242 || open[0].PidStart != 777 || open[0].CgroupPath != "/sys/fs/cgroup/termd/e2" {
		t.Fatalf("open intents = %+v", open)
	}
	r := open[0].OutcomeUnknown(time.Now(), "")
	got, err := s2.Append(r)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != receipt.StatusOutcomeUnknown || got.ExitCode != nil || got.Command != draft.Command || got.ExecutionID != "e2" {
		t.Fatalf("outcome_unknown receipt: %+v", got)
	}
	if err := receipt.Verify(got, k.PublicKeys(), k.HMACKey()); err != nil {
		t.Fatal(err)
	}
	if open, _ := s2.RecoverIntents(); len(open) != 0 {
		t.Fatalf("intent still open after its receipt: %+v", open)
	}
}

func TestListGetLatestExport(t *testing.T) {
	s, k, _ := newStore(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for i := 0; i < 12; i++ {
		st := receipt.Statuses[i%len(receipt.Statuses)]
		r := sampleReceipt(k, st, []string{"a", "b"}[i%2])
		r.StartedAt = base.Add(time.Duration(i) * time.Hour)
		r.FinishedAt = r.StartedAt
		if st.Ran() {
			r.FinishedAt = r.StartedAt.Add(time.Duration(r.DurationMs) * time.Millisecond)
		}
		if i == 5 {
			r.Approved = true
			r.Approver = &receipt.Principal{Kind: "token", ID: "ops-token", Role: "operator"}
		}
		got, err := s.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got.ID)
	}
	check := func(name string, f Filter, wantSeqs ...int64) {
		t.Helper()
		got, err := s.List(f)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, r := range got {
			seqs = append(seqs, r.Seq)
		}
		if len(seqs) != len(wantSeqs) {
			t.Errorf("%s: seqs %v, want %v", name, seqs, wantSeqs)
			return
		}
		for i := range seqs {
			if seqs[i] != wantSeqs[i] {
				t.Errorf("%s: seqs %v, want %v", name, seqs, wantSeqs)
				return
			}
		}
	}
	check("session", Filter{SessionID: "b"}, 2, 4, 6, 8, 10, 12)
	check("status", Filter{Status: receipt.StatusSucceeded}, 1, 1+int64(len(receipt.Statuses)))
	check("time range", Filter{Since: base.Add(3 * time.Hour), Until: base.Add(6 * time.Hour)}, 4, 5, 6)
	check("principal approver", Filter{Principal: "ops-token"}, 6)
	check("principal requester", Filter{Principal: "uid:1000", Limit: 3, Offset: 2}, 3, 4, 5)
	check("desc", Filter{Desc: true, Limit: 2}, 12, 11)
	check("combined", Filter{SessionID: "a", Since: base.Add(4 * time.Hour)}, 5, 7, 9, 11)
	if _, err := s.List(Filter{Status: "nope"}); err == nil {
		t.Error("unknown status filter accepted")
	}

	got, err := s.Get(ids[3])
	if err != nil || got.Seq != 4 {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := s.Get("missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
	lat, err := s.Latest("a")
	if err != nil || lat.Seq != 11 {
		t.Fatalf("Latest(a) = %v, %v", lat, err)
	}
	if _, err := s.Latest("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest(nope): %v", err)
	}
	var buf bytes.Buffer
	if err := s.ExportJSONL(&buf, Filter{Limit: -1}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 12 {
		t.Fatalf("%d JSONL lines", len(lines))
	}
	prev := receipt.GenesisHash
	for i, l := range lines {
		r, err := receipt.VerifyJSON([]byte(l), k.PublicKeys())
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if r.PrevHash != prev {
			t.Fatalf("line %d does not link to the previous line", i)
		}
		prev = receipt.ChainHash([]byte(l))
	}
}

func TestTriggersRefuseUpdateAndDelete(t *testing.T) {
	s, k, _ := newStore(t)
	if _, err := s.Append(sampleReceipt(k, receipt.StatusSucceeded, "s")); err != nil {
		t.Fatal(err)
	}
	s.AppendIntent(Intent{ExecutionID: "x"})
	for _, q := range []string{
		`UPDATE receipts SET status = 'failed'`,
		`DELETE FROM receipts`,
		`UPDATE intents SET plan_id = 'p'`,
		`DELETE FROM intents`,
	} {
		if _, err := s.db.Exec(q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: err = %v", q, err)
		}
	}
}

func TestVerifyRejectsUnknownKey(t *testing.T) {
	k := newKeys(t)
	r := sampleReceipt(k, receipt.StatusSucceeded, "s")
	r.ID, r.Seq, r.PrevHash = "r", 1, receipt.GenesisHash
	k.Sign(r)
	if err := receipt.Verify(r, map[string]ed25519.PublicKey{}, nil); err == nil || !strings.Contains(err.Error(), "unknown key id") {
		t.Fatalf("err = %v", err)
	}
	if err := receipt.Verify(r, k.PublicKeys(), []byte("wrong hmac key wrong hmac key!!!")); err == nil {
		t.Fatal("wrong HMAC key accepted")
	}
}
