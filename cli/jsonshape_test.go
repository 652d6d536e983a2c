package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/termd/termd/proto/termd/v1"
)

// enumNames are the full names of every termd enum value
// (PLAN_STATE_AWAITING_APPROVAL, VERDICT_ASK, ...).
func enumNames() map[string]bool {
	names := map[string]bool{}
	protoregistry.GlobalTypes.RangeEnums(func(et protoreflect.EnumType) bool {
		ed := et.Descriptor()
		if strings.HasPrefix(string(ed.FullName()), "termd.") {
			for i := 0; i < ed.Values().Len(); i++ {
				names[string(ed.Values().Get(i).Name())] = true
			}
		}
		return true
	})
	return names
}

// checkShape walks a decoded document: no enum value in its proto spelling,
// and the 64-bit counters are numbers.
func checkShape(t *testing.T, what string, v any, names map[string]bool, path string) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch k {
			case "seq", "global_seq", "stdout_bytes", "stderr_bytes", "bytes", "offset":
				if _, isStr := e.(string); isStr {
					t.Errorf("%s: %s.%s is the string %q; 64-bit integers are JSON numbers", what, path, k, e)
				}
			}
			checkShape(t, what, e, names, path+"."+k)
		}
	case []any:
		for _, e := range x {
			checkShape(t, what, e, names, path+"[]")
		}
	case string:
		if names[x] {
			t.Errorf("%s: %s is %q; -o json spells enum values as the tables do (lowercase, without the type prefix)", what, path, x)
		}
	}
}

// `termctl -o json` and `-o yaml` spell enum values one way everywhere, the
// short lowercase words `run` and the tables print (`succeeded`, `ask`,
// `confirm`, `awaiting_approval`), and write 64-bit integers as numbers:
// across plan, pending, run, ps, receipts, sessions, status and grants.
func TestJSONOutputOneSpelling(t *testing.T) {
	d := startWithAgent(t)
	names := enumNames()
	if !names["PLAN_STATE_AWAITING_APPROVAL"] || !names["VERDICT_ASK"] {
		t.Fatalf("the enum registry lacks termd's enums: %d names", len(names))
	}
	ask := plan(t, d, []string{"--mode", "confirm"}, "touch", "shape.txt")
	if ask.State != "awaiting_approval" || ask.Decision.Verdict != "ask" || ask.Decision.Risk == "" {
		t.Fatalf("plan -o json: %+v", ask)
	}
	run := decode[map[string]any](t, ok(t, d, "run", "-o", "json", "--", "echo", "shape"))
	ex, _ := run["execution"].(map[string]any)
	if run["state"] != "succeeded" || ex["state"] != "succeeded" || ex["stdout_bytes"] != float64(6) {
		t.Errorf("run -o json: state %v, execution state %v, stdout_bytes %v (want succeeded, succeeded, 6)", run["state"], ex["state"], ex["stdout_bytes"])
	}
	for _, args := range [][]string{
		{"plan", "--mode", "confirm", "--", "touch", "shape2.txt"},
		{"pending"},
		{"run", "--", "ls"},
		{"ps", "--all"},
		{"receipts", "list"},
		{"sessions"},
		{"status"},
		{"grants", "list", "--all"},
		{"policy", "check", "--", "ls"},
	} {
		what := strings.Join(args, " ")
		var doc any
		if err := json.Unmarshal([]byte(ok(t, d, append([]string{"-o", "json"}, args...)...)), &doc); err != nil {
			t.Fatalf("%s -o json: %v", what, err)
		}
		checkShape(t, what+" -o json", doc, names, "")
		var ydoc any
		if err := yaml.Unmarshal([]byte(ok(t, d, append([]string{"-o", "yaml"}, args...)...)), &ydoc); err != nil {
			t.Fatalf("%s -o yaml: %v", what, err)
		}
		checkShape(t, what+" -o yaml", ydoc, names, "")
	}
	st := decode[map[string]any](t, ok(t, d, "status", "-o", "json"))
	if c, _ := st["caller"].(map[string]any); c == nil || c["role"] != "operator" {
		t.Errorf("status -o json: caller %v; want role operator", st["caller"])
	}
}
