package receipt

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func testReceipt() *Receipt {
	code := 0
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	return &Receipt{
		ID: "r1", Seq: 1, PrevHash: strings.Repeat("0", 64), PlanID: "p1", SessionID: "s1", ExecutionID: "e1",
		RequestHash: strings.Repeat("a", 64), Requester: Principal{Kind: "unix", ID: "uid:0", Name: "root", Role: "operator"},
		Command: "true", CommandSHA256: strings.Repeat("b", 64), BinaryPath: "/usr/bin/true", BinarySHA256: strings.Repeat("c", 64),
		Cwd: "/w", Mode: "confirm", Risk: "low", Decision: "allow", Policy: Policy{Allowed: true, Risk: "low", Reasons: []string{}, Argv: []string{"true"}, Version: "v", RuleIDs: []string{}},
		Limits: Limits{TimeoutMs: 1000, MaxOutputBytes: 1}, Status: StatusSucceeded, StartedAt: now, FinishedAt: now, ExitCode: &code,
		StdoutDigest: strings.Repeat("d", 64), StderrDigest: strings.Repeat("e", 64),
	}
}

// Receipts are written as 1.6 (the sandbox record of 1.1, grant_id of 1.2,
// the terminal of 1.3, credentials of 1.4, privileged, run_as.host_uid and
// git_identity of 1.5, sandbox.network_mode of 1.6); receipts written as
// 1.5 before network modes, as 1.4 before privileged and git
// identities, as 1.3 before credentials, as 1.2 before terminals,
// receipts written as 1.0 before the sandbox and as 1.1 before grants keep
// verifying against their own schema, and an older receipt cannot carry a
// newer member.
func TestSchemaVersionsVerify(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	s := Signer{KeyID: KeyIDFor(pub), Ed25519: priv, HMAC: []byte("k")}
	keys := map[string]ed25519.PublicKey{s.KeyID: pub}
	sign := func(r *Receipt) []byte {
		t.Helper()
		if err := s.Sign(r); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	cur := checkCurrentSchema(t, sign, keys)

	checkCertPrincipalSchema(t, sign, keys, cur)

	v15n := checkSchemas15To12(t, sign, keys, cur)

	v11 := testReceipt()
	v11.SchemaVersion = "1.1"
	v11.Sandbox = v15n.Sandbox
	v11.Sandbox.NetworkMode = ""
	if _, err := VerifyJSON(sign(v11), keys); err != nil {
		t.Fatalf("a 1.1 receipt no longer verifies: %v", err)
	}
	v11g := testReceipt()
	v11g.SchemaVersion = "1.1"
	v11g.GrantID = "g-1234"
	if _, err := VerifyJSON(sign(v11g), keys); err == nil || !strings.Contains(err.Error(), "1.1") {
		t.Fatalf("a 1.1 receipt with a grant_id member must not match schema 1.1: %v", err)
	}

	old := testReceipt()
	old.SchemaVersion = "1.0"
	if _, err := VerifyJSON(sign(old), keys); err != nil {
		t.Fatalf("a 1.0 receipt no longer verifies: %v", err)
	}

	bad := testReceipt()
	bad.SchemaVersion = "1.0"
	bad.Sandbox = cur.Sandbox
	if _, err := VerifyJSON(sign(bad), keys); err == nil || !strings.Contains(err.Error(), "1.0") {
		t.Fatalf("a 1.0 receipt with a sandbox member must not match schema 1.0: %v", err)
	}

	wrong := testReceipt()
	wrong.Sandbox = &Sandbox{Profile: "anything-goes", Level: "full", Mode: "required"}
	if _, err := VerifyJSON(sign(wrong), keys); err == nil {
		t.Fatal("an unknown sandbox profile passed the schema")
	}

	future := testReceipt()
	future.SchemaVersion = "9.9"
	if _, err := VerifyJSON(sign(future), keys); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("an unknown schema version: %v", err)
	}
}

// checkCurrentSchema signs receipts of the current schema (1.7) with every
// member, and ones with a malformed member that must not pass; it returns
// the full one (cur) for the older versions' checks.
func checkCurrentSchema(t *testing.T, sign func(r *Receipt) []byte, keys map[string]ed25519.PublicKey) (cur *Receipt) {
	cur = testReceipt()
	cur.Sandbox = &Sandbox{Profile: "workspace-write", Level: "full", Mode: "required", Platform: "linux-landlock", LandlockABI: 7, Seccomp: true, MountNamespace: true, NetworkNamespace: true, NetworkMode: "workspace-loopback", CapabilitiesDropped: true}
	cur.GrantID = "g-1234"
	cur.Terminal = &Terminal{Rows: 24, Cols: 80, IdleTimeoutMs: 600000, Inputs: []TerminalInput{
		{Seq: 1, At: time.Now(), By: "agent", Kind: "input", Text: "1+1<ENTER>", SHA256: strings.Repeat("f", 64)},
		{Seq: 2, At: time.Now(), By: "root", Kind: "input_taken"},
	}}
	cur.Credentials = []string{"GH_TOKEN", "NPM_TOKEN"}
	cur.RunAs = &RunAs{User: "root", UID: 0, GID: 0, HostUID: 65533}
	cur.GitIdentity = &GitIdentity{Name: "nobody (via termd)", Email: "nobody@host", Source: "default"}
	cur.Stdin = &Stdin{Bytes: 3, SHA256: strings.Repeat("9", 64)}
	if _, err := VerifyJSON(sign(cur), keys); err != nil || cur.SchemaVersion != "1.7" {
		t.Fatalf("a 1.7 receipt with its sandbox, grant, terminal inputs, credentials, host uid, git identity and stdin: %v (schema %s)", err, cur.SchemaVersion)
	}
	badStdin := testReceipt()
	badStdin.Stdin = &Stdin{Bytes: 0, SHA256: "zz"}
	if _, err := VerifyJSON(sign(badStdin), keys); err == nil {
		t.Fatal("a stdin of 0 bytes with a malformed digest passed the schema")
	}
	v15 := testReceipt()
	v15.SchemaVersion = "1.5"
	v15.GitIdentity = cur.GitIdentity
	if _, err := VerifyJSON(sign(v15), keys); err != nil {
		t.Fatalf("a 1.5 receipt no longer verifies: %v", err)
	}
	v15.Terminal = &Terminal{Rows: 24, Cols: 80, Inputs: []TerminalInput{{Seq: 1, At: time.Now(), By: "root", Kind: "input_released", Text: "to agent"}}}
	if _, err := VerifyJSON(sign(v15), keys); err == nil {
		t.Fatal("a 1.5 receipt with an input_released terminal input must not match schema 1.5")
	}
	rel := testReceipt()
	rel.Terminal = v15.Terminal
	if _, err := VerifyJSON(sign(rel), keys); err != nil {
		t.Fatalf("a 1.6 receipt with an input_released terminal input: %v", err)
	}
	v15.Terminal = nil
	v15.Stdin = cur.Stdin
	if _, err := VerifyJSON(sign(v15), keys); err == nil || !strings.Contains(err.Error(), "1.5") {
		t.Fatalf("a 1.5 receipt with stdin must not match schema 1.5: %v", err)
	}
	cur.Egress = &Egress{AllowList: "registries", Destinations: []EgressDestination{{Host: "registry.npmjs.org", Port: 443, Address: "104.16.0.1", Connections: 2, BytesUp: 900, BytesDown: 40000}},
		Refused: []EgressRefusal{{Host: "evil.example", Port: 443, Reason: "not_on_allow_list", Detail: "evil.example is not on allow-list \"registries\"", Count: 3}}}
	badEgress := testReceipt()
	badEgress.Egress = &Egress{AllowList: "registries", Destinations: []EgressDestination{}, Refused: []EgressRefusal{{Host: "x", Port: 1, Reason: "felt like it", Count: 1}}}
	if _, err := VerifyJSON(sign(badEgress), keys); err == nil {
		t.Fatal("an egress refusal with an unknown reason passed the schema")
	}
	if _, err := VerifyJSON(sign(cur), keys); err != nil || cur.SchemaVersion != "1.7" {
		t.Fatalf("a 1.7 receipt with its sandbox and network mode, grant, terminal inputs, credentials, host uid, git identity and egress: %v (schema %s)", err, cur.SchemaVersion)
	}
	for _, m := range []string{"none", "host", "egress:npm-registry"} {
		nm := testReceipt()
		nm.Sandbox = &Sandbox{Profile: "read-only", Level: "full", Mode: "required", NetworkMode: m}
		if _, err := VerifyJSON(sign(nm), keys); err != nil {
			t.Fatalf("a 1.6 receipt with network mode %s: %v", m, err)
		}
	}
	badNet := testReceipt()
	badNet.Sandbox = &Sandbox{Profile: "read-only", Level: "full", Mode: "required", NetworkMode: "everything"}
	if _, err := VerifyJSON(sign(badNet), keys); err == nil {
		t.Fatal("an unknown network mode passed the schema")
	}
	pr := testReceipt()
	pr.RunAs, pr.Privileged = &RunAs{User: "root"}, true
	if _, err := VerifyJSON(sign(pr), keys); err != nil {
		t.Fatalf("a 1.6 receipt of a privileged run: %v", err)
	}
	return cur
}

// checkCertPrincipalSchema: a certificate principal, and an approval
// through a gateway certificate, need 1.7; a plain 1.6 receipt still verifies.
func checkCertPrincipalSchema(t *testing.T, sign func(r *Receipt) []byte, keys map[string]ed25519.PublicKey, cur *Receipt) {
	// 1.7: a certificate principal, and a person approving through a
	// gateway certificate; a 1.6 receipt can carry neither.
	cert := testReceipt()
	cert.Requester = Principal{Kind: "cert", ID: "cert:ci-agent", Role: "agent", Name: "ci-agent"}
	cert.Approver = &Principal{Kind: "cert", ID: "cert:gw-1/token:alice", Role: "operator", Name: "token:alice via gateway", Gateway: "gw-1"}
	if _, err := VerifyJSON(sign(cert), keys); err != nil || cert.SchemaVersion != "1.7" {
		t.Fatalf("a 1.7 receipt approved through a gateway certificate: %v (schema %s)", err, cert.SchemaVersion)
	}
	for _, mod := range []func(r *Receipt){
		func(r *Receipt) { r.Approver = nil },
		func(r *Receipt) { r.Requester.Kind = "unix" },
	} {
		v16 := cert.Clone()
		v16.SchemaVersion, v16.Signature, v16.SignatureEd25519 = "1.6", "", ""
		mod(v16)
		if _, err := VerifyJSON(sign(v16), keys); err == nil || !strings.Contains(err.Error(), "1.6") {
			t.Fatalf("a 1.6 receipt with a cert principal or a gateway must not match schema 1.6: %v", err)
		}
	}
	v16 := testReceipt()
	v16.SchemaVersion = "1.6"
	v16.Egress, v16.Stdin = cur.Egress, cur.Stdin
	if _, err := VerifyJSON(sign(v16), keys); err != nil {
		t.Fatalf("a 1.6 receipt no longer verifies: %v", err)
	}
}

// checkSchemas15To12: receipts of schemas 1.5 down to 1.2 still verify, and
// each refuses the members that came after it; it returns the 1.5 receipt
// (v15n), whose sandbox the 1.1 check reuses.
func checkSchemas15To12(t *testing.T, sign func(r *Receipt) []byte, keys map[string]ed25519.PublicKey, cur *Receipt) (v15n *Receipt) {
	v15n = testReceipt()
	v15n.SchemaVersion = "1.5"
	v15n.RunAs, v15n.Privileged, v15n.GitIdentity = cur.RunAs, true, cur.GitIdentity
	v15n.Sandbox = &Sandbox{Profile: "read-only", Level: "full", Mode: "required", NetworkNamespace: true}
	if _, err := VerifyJSON(sign(v15n), keys); err != nil {
		t.Fatalf("a 1.5 receipt no longer verifies: %v", err)
	}
	v15n.Sandbox.NetworkMode = "none"
	if _, err := VerifyJSON(sign(v15n), keys); err == nil || !strings.Contains(err.Error(), "1.5") {
		t.Fatalf("a 1.5 receipt with sandbox.network_mode must not match schema 1.5: %v", err)
	}
	v15n.Sandbox.NetworkMode, v15n.Egress = "", cur.Egress
	if _, err := VerifyJSON(sign(v15n), keys); err == nil || !strings.Contains(err.Error(), "1.5") {
		t.Fatalf("a 1.5 receipt with egress must not match schema 1.5: %v", err)
	}
	badGit := testReceipt()
	badGit.GitIdentity = &GitIdentity{Name: "x", Email: "a@b", Source: "guessed"}
	if _, err := VerifyJSON(sign(badGit), keys); err == nil {
		t.Fatal("a git identity source that is neither config nor default passed the schema")
	}

	v14 := testReceipt()
	v14.SchemaVersion = "1.4"
	v14.Credentials = cur.Credentials
	if _, err := VerifyJSON(sign(v14), keys); err != nil {
		t.Fatalf("a 1.4 receipt no longer verifies: %v", err)
	}
	v14.Privileged = true
	if _, err := VerifyJSON(sign(v14), keys); err == nil || !strings.Contains(err.Error(), "1.4") {
		t.Fatalf("a 1.4 receipt with privileged must not match schema 1.4: %v", err)
	}
	v14.Privileged, v14.RunAs = false, cur.RunAs
	if _, err := VerifyJSON(sign(v14), keys); err == nil || !strings.Contains(err.Error(), "1.4") {
		t.Fatalf("a 1.4 receipt with run_as.host_uid must not match schema 1.4: %v", err)
	}
	v14.RunAs, v14.GitIdentity = nil, cur.GitIdentity
	if _, err := VerifyJSON(sign(v14), keys); err == nil || !strings.Contains(err.Error(), "1.4") {
		t.Fatalf("a 1.4 receipt with git_identity must not match schema 1.4: %v", err)
	}
	badCred := testReceipt()
	badCred.Credentials = []string{"gh token"}
	if _, err := VerifyJSON(sign(badCred), keys); err == nil {
		t.Fatal("a credential that is not a name passed the schema")
	}

	v13 := testReceipt()
	v13.SchemaVersion = "1.3"
	v13.Terminal = cur.Terminal
	if _, err := VerifyJSON(sign(v13), keys); err != nil {
		t.Fatalf("a 1.3 receipt no longer verifies: %v", err)
	}
	v13.Credentials = cur.Credentials
	if _, err := VerifyJSON(sign(v13), keys); err == nil || !strings.Contains(err.Error(), "1.3") {
		t.Fatalf("a 1.3 receipt with credentials must not match schema 1.3: %v", err)
	}

	v12 := testReceipt()
	v12.SchemaVersion = "1.2"
	v12.GrantID = "g-1234"
	if _, err := VerifyJSON(sign(v12), keys); err != nil {
		t.Fatalf("a 1.2 receipt no longer verifies: %v", err)
	}
	v12.Terminal = cur.Terminal
	if _, err := VerifyJSON(sign(v12), keys); err == nil || !strings.Contains(err.Error(), "1.2") {
		t.Fatalf("a 1.2 receipt with a terminal member must not match schema 1.2: %v", err)
	}
	badIn := testReceipt()
	badIn.Terminal = &Terminal{Rows: 24, Cols: 80, Inputs: []TerminalInput{{Seq: 1, At: time.Now(), By: "a", Kind: "input", Text: "x", SHA256: "nothex"}}}
	if _, err := VerifyJSON(sign(badIn), keys); err == nil {
		t.Fatal("an input digest that is not hex passed the schema")
	}
	return v15n
}
