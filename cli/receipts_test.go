package cli_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/termd/termd/internal/harness"
)

type receiptRow struct {
	ID       string `json:"id"`
	Seq      int64  `json:"seq"`
	PlanID   string `json:"plan_id"`
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
}

func TestReceiptsListShowExportVerifyOffline(t *testing.T) {
	d := start(t)
	p := plan(t, d, nil, "echo", "signed words")
	expect(t, d, 0, "execute", p.ID, "--follow")

	list := decode[struct {
		Receipts []receiptRow `json:"receipts"`
	}](t, ok(t, d, "receipts", "list", "--session", p.SessionID, "-o", "json"))
	var rc receiptRow
	for _, r := range list.Receipts {
		if r.PlanID == p.ID {
			rc = r
		}
	}
	if rc.ID == "" || rc.Status != "succeeded" {
		t.Fatalf("receipts list should hold the run's succeeded receipt: %+v", list.Receipts)
	}
	if out := ok(t, d, "receipts", "list"); !strings.Contains(out, rc.ID) {
		t.Fatalf("receipts list table lacks %s:\n%s", rc.ID, out)
	}
	shown := decode[struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Stdout string `json:"stdout"`
	}](t, ok(t, d, "receipts", "show", rc.ID, "-o", "json"))
	if shown.ID != rc.ID || !strings.Contains(shown.Stdout, "signed words") {
		t.Fatalf("receipts show -o json should be the receipt, got %+v", shown)
	}
	if out := ok(t, d, "receipts", "show", rc.ID); !strings.Contains(out, "status:") || !strings.Contains(out, "signed words") {
		t.Fatalf("receipts show:\n%s", out)
	}

	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	file := write("receipt.json", ok(t, d, "receipts", "export", rc.ID))
	shared := write("shared.json", ok(t, d, "receipts", "export", rc.ID, "--share"))
	if strings.Contains(readFile(t, shared), "signed words") {
		t.Fatal("a share export should not carry the output")
	}
	key := write("termd.pub", ok(t, d, "receipts", "public-key"))
	// With the daemon: the key comes from it (the one noun, and the old
	// spelling, a hidden alias).
	ok(t, d, "receipts", "verify", file)
	ok(t, d, "receipt", "verify", file)
	// People with only openssl can read the key as it is (plain SPKI PEM).
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		harness.Missing(t, "openssl is not installed: run scripts/ci-deps.sh")
	}
	if out, err := exec.Command(openssl, "pkey", "-pubin", "-in", key, "-noout").CombinedOutput(); err != nil {
		t.Fatalf("openssl pkey -pubin -in key.pem -noout should accept the exported key: %v\n%s\n%s", err, out, readFile(t, key))
	}
	// Its key id is shown beside it (stderr), and names the receipt's signature.
	_, keyErr := expect(t, d, 0, "receipts", "public-key")
	var signed struct {
		KeyID string `json:"key_id"`
	}
	if err := json.Unmarshal([]byte(readFile(t, file)), &signed); err != nil {
		t.Fatal(err)
	}
	if id := signed.KeyID; id == "" || !strings.Contains(keyErr, "key id "+id) {
		t.Fatalf("public-key should name the key id %q on stderr, got %q", id, keyErr)
	}

	// Offline: no daemon at all, only the public key file.
	d.Stop()
	offline := []string{"--socket", filepath.Join(dir, "none.sock")}
	out := ok(t, d, append(offline, "receipt", "verify", file, "--public-key", key)...)
	if !strings.Contains(out, "valid receipt "+rc.ID) {
		t.Fatalf("offline verify: %q", out)
	}
	ok(t, d, append(offline, "receipt", "verify", shared, "--public-key", key)...)
	res := decode[struct {
		Valid bool   `json:"valid"`
		ID    string `json:"id"`
	}](t, ok(t, d, append(offline, "receipt", "verify", file, "--public-key", key, "-o", "json")...))
	if !res.Valid || res.ID != rc.ID {
		t.Fatalf("verify -o json: %+v", res)
	}

	// Any change fails it.
	tampered := write("tampered.json", strings.Replace(readFile(t, file), "signed words", "signed wordz", 1))
	_, errOut := expect(t, d, 1, append(offline, "receipt", "verify", tampered, "--public-key", key)...)
	if !strings.Contains(errOut, "NOT valid") {
		t.Fatalf("a tampered receipt should fail saying so, got %q", errOut)
	}
	// Without --public-key and without a daemon, it says how to go offline.
	_, errOut = expect(t, d, 1, append(offline, "receipt", "verify", file)...)
	if !strings.Contains(errOut, "--public-key") {
		t.Fatalf("want a hint to pass --public-key, got %q", errOut)
	}
	// A receipt edited by hand is reported as altered, schema detail after.
	edited := write("edited.json", strings.Replace(readFile(t, file), `"exit_code": 0`, `"exit_code": 1`, 1))
	if edited == file || readFile(t, edited) == readFile(t, file) {
		t.Fatal("the test could not edit exit_code")
	}
	_, errOut = expect(t, d, 1, append(offline, "receipt", "verify", edited, "--public-key", key)...)
	if !strings.Contains(errOut, "altered") {
		t.Fatalf("a hand-edited exit code should be reported as altered, got %q", errOut)
	}
	// The receipt passed as the key file is named for what it is not.
	_, errOut = expect(t, d, 1, append(offline, "receipt", "verify", file, "--public-key", file)...)
	if !strings.Contains(errOut, "not a public key file") {
		t.Fatalf("a receipt as --public-key: %q", errOut)
	}
	// The wrong file (a plan) is named for what it is not, without any key.
	planFile := write("plan.json", `{"id":"`+p.ID+`","state":"succeeded"}`)
	_, errOut = expect(t, d, 1, append(offline, "receipt", "verify", planFile)...)
	if !strings.Contains(errOut, "not a termd receipt") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
		t.Fatalf("verifying a plan file should say in one line it is not a receipt, got %q", errOut)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAuditVerifyNamesFirstBadSeq(t *testing.T) {
	d := start(t)
	for _, w := range []string{"one", "two", "three"} {
		expect(t, d, 0, "run", "--", "echo", w)
	}
	if out := ok(t, d, "audit", "verify"); !strings.Contains(out, "audit chain ok") {
		t.Fatalf("audit verify: %q", out)
	}
	// Tamper with the second receipt as someone with file access would.
	d.Stop()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.StateDir, "receipts.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`DROP TRIGGER receipts_no_update`,
		`UPDATE receipts SET body = CAST(replace(CAST(body AS TEXT), 'two', 'TWO') AS BLOB) WHERE seq = 2`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db.Close()
	d.Restart()
	_, errOut := expect(t, d, 1, "audit", "verify")
	if !strings.Contains(errOut, "seq 2") {
		t.Fatalf("audit verify should name seq 2, got %q", errOut)
	}
}

func TestReceiptsExportAllIsVerifiableJSONLines(t *testing.T) {
	d := start(t)
	ok(t, d, "run", "--", "echo", "one")
	ok(t, d, "run", "--", "echo", "two")
	expect(t, d, 125, "run", "--", "sudo", "ls")
	out := ok(t, d, "receipts", "export", "--all")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 JSON lines (two runs and a blocked plan), got %d:\n%s", len(lines), out)
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "termd.pub")
	os.WriteFile(key, []byte(ok(t, d, "receipts", "public-key")), 0o644)
	for i, l := range lines {
		var r struct {
			Seq    int64  `json:"seq"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Seq != int64(i+1) {
			t.Fatalf("line %d is not receipt seq %d in chain order: %v %s", i, i+1, err, l)
		}
		f := filepath.Join(dir, fmt.Sprintf("r%d.json", i))
		os.WriteFile(f, []byte(l), 0o644)
		ok(t, d, "receipt", "verify", f, "--public-key", key)
	}
	// The export file as a whole verifies, offline (issue 31: verify
	// refused what export --all wrote).
	all := filepath.Join(dir, "all.jsonl")
	os.WriteFile(all, []byte(out), 0o644)
	if got := ok(t, d, "receipts", "verify", all, "--public-key", key); !strings.Contains(got, "3 valid receipts (seq 1 to 3)") {
		t.Fatalf("verify of the JSON Lines export: %q", got)
	}
	// One altered line is found and named.
	tampered := strings.Replace(out, `"echo two"`, `"echo TWO"`, 1)
	if tampered == out {
		t.Fatalf("the export does not hold the command as expected:\n%s", out)
	}
	os.WriteFile(all, []byte(tampered), 0o644)
	if got, _ := expect(t, d, 1, "receipts", "verify", all, "--public-key", key); !strings.Contains(got, "all.jsonl:2: NOT valid") {
		t.Fatalf("tampered line 2 not named: %q", got)
	}
	if out := ok(t, d, "receipts", "export", "--all", "--status", "blocked"); strings.Count(out, "\n") != 1 {
		t.Fatalf("filtered export:\n%s", out)
	}
	expect(t, d, 2, "receipts", "export")
}
