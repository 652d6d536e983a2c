package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/termd/termd/internal/schemacheck/schematest"
)

// reference compiles a schema file with a general JSON Schema validator
// (test only), the yardstick for the hand-written one.
func reference(t *testing.T, version string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schemas[version]))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := "https://termd.dev/schema/receipt-" + version + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// baseDocs are valid receipts of each version: every status, with and
// without the optional members, a share export.
func baseDocs(t *testing.T, version string) []map[string]any {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(nil)
	s := Signer{KeyID: KeyIDFor(pub), Ed25519: priv, HMAC: []byte("k")}
	var out []map[string]any
	for _, st := range Statuses {
		if version == "1.0" && st == StatusOutputLimit {
			continue // 1.1 added it
		}
		r := testReceipt()
		r.SchemaVersion = version
		r.Status = st
		switch st {
		case StatusSucceeded:
		case StatusFailed:
			c := 2
			r.ExitCode = &c
		case StatusDenied, StatusBlocked, StatusExpired:
			r.ExitCode, r.Decision = nil, "deny"
			r.Approved = st == StatusExpired
			if r.Approved {
				r.Approver = &Principal{Kind: "token", ID: "token:alice", Role: "operator", Name: "alice"}
			}
		default:
			r.ExitCode, r.Signal = nil, "SIGKILL"
			uid := 0
			r.RunAs = &RunAs{User: "root", UID: 0, GID: 0}
			r.Requester.UID, r.Requester.GID = &uid, &uid
			r.Limits.MemoryBytes, r.Limits.CPUPercent, r.Limits.MaxPids = 1<<20, 50, 64
			r.Detail, r.AdviceDigest = "ended", strings.Repeat("f", 64)
			if version != "1.0" {
				r.Sandbox = &Sandbox{Profile: "read-only", Level: "partial", Mode: "best_effort", Platform: "linux-landlock", LandlockABI: 3, Missing: []string{"seccomp"}}
			}
		}
		if err := s.Sign(r); err != nil {
			t.Fatal(err)
		}
		out = append(out, toMap(t, r))
	}
	shared := testReceipt()
	shared.SchemaVersion = version
	shared.SharingRedacted = true
	for _, f := range []*string{&shared.Command, &shared.Cwd, &shared.Stdout, &shared.Stderr} {
		*f = "[REDACTED FOR SHARING]"
	}
	shared.Policy.Argv = []string{"[REDACTED FOR SHARING]", "[REDACTED FOR SHARING]"}
	if err := s.Sign(shared); err != nil {
		t.Fatal(err)
	}
	return append(out, toMap(t, shared))
}

func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The hand-written validator accepts exactly what the schema files accept:
// checked against a general JSON Schema validator on valid receipts of
// every status and version and on thousands of broken ones.
func TestSchemaCheckAgreesWithJSONSchema(t *testing.T) {
	for _, version := range []string{"1.0", SchemaVersion} {
		ref := reference(t, version)
		mine, err := compiledSchema(version)
		if err != nil {
			t.Fatal(err)
		}
		checked, invalid := 0, 0
		for bi, base := range baseDocs(t, version) {
			docs := map[string]map[string]any{}
			// Mutate the receipts with the most members (killed), a denial
			// and a share export; the status mutations reach every if/then.
			if st := base["status"]; st == "killed" || st == "denied" || base["sharing_redacted"] == true {
				docs = schematest.Mutations(base)
			}
			docs["base"] = base
			names := make([]string, 0, len(docs))
			for name := range docs {
				names = append(names, name)
			}
			sort.Strings(names)
			for i, name := range names {
				doc := docs[name]
				if raceDetector && i%8 != 0 && name != "base" {
					continue // an eighth of the corpus under -race
				}
				raw, _ := json.Marshal(doc)
				refInst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				inst, err := decodeInstance(raw)
				if err != nil {
					t.Fatal(err)
				}
				refErr := ref.Validate(refInst)
				var myErr error
				if errs := mine.Validate(inst); len(errs) > 0 {
					myErr = errs[0]
				}
				if (refErr == nil) != (myErr == nil) {
					t.Fatalf("schema %s, base %d, %s:\n  reference: %v\n  termd: %v\n  %s", version, bi, name, refErr, myErr, raw)
				}
				if name == "base" && myErr != nil {
					t.Fatalf("schema %s: base %d is invalid: %v", version, bi, myErr)
				}
				checked++
				if myErr != nil {
					invalid++
				}
			}
		}
		t.Logf("schema %s: %d documents agree (%d invalid)", version, checked, invalid)
		if invalid < checked/2 {
			t.Fatalf("schema %s: only %d of %d mutations were invalid: the corpus does not exercise the schema", version, invalid, checked)
		}
	}
}
