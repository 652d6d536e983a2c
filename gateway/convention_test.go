package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/harness"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// snakeKeys reports every object key below v that is not snake_case.
func snakeKeys(v any, path string, bad *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !snakeCase.MatchString(k) {
				*bad = append(*bad, path+"."+k)
			}
			if path == ".decision.env" || path == ".env" {
				continue // environment names are data, not field names
			}
			snakeKeys(e, path+"."+k, bad)
		}
	case []any:
		for _, e := range x {
			snakeKeys(e, path+"[]", bad)
		}
	}
}

// One object through all three surfaces: the policy's decision on one
// request, asked through the gateway's REST API, `termctl -o json` and the
// MCP bridge's terminal_policy_check, is written with the same snake_case
// field names and says the same thing (docs/ARCHITECTURE.md, "JSON").
func TestOneJSONConventionAcrossSurfaces(t *testing.T) {
	e := newEnv(t)
	argv := []any{"ls", "-la"}
	surfaces := map[string]map[string]any{}

	surfaces["gateway"] = e.call("POST", "/v1/policy:check", map[string]any{"request": map[string]any{"argv": argv}})

	out, errOut, code := e.d.Run("termctl", "policy", "check", "-o", "json", "--", "ls", "-la")
	if code != 0 {
		t.Fatalf("termctl policy check: exit %d: %s", code, errOut)
	}
	var tc map[string]any
	if err := json.Unmarshal([]byte(out), &tc); err != nil {
		t.Fatalf("termctl -o json: %v\n%s", err, out)
	}
	surfaces["termctl"] = tc

	cmd := exec.Command(harness.Bin(t, "termd-mcp"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TERMD_SOCKET=" + e.d.Socket}
	cmd.Dir = e.d.Workspace
	ctx := context.Background()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "convention-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "terminal_policy_check", Arguments: map[string]any{"argv": argv}})
	if err != nil || res.IsError {
		t.Fatalf("terminal_policy_check: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var mc map[string]any
	if err := json.Unmarshal(raw, &mc); err != nil {
		t.Fatal(err)
	}
	surfaces["mcp"] = mc

	hashes := map[string]bool{}
	for name, obj := range surfaces {
		var bad []string
		snakeKeys(obj, "", &bad)
		if len(bad) > 0 {
			t.Errorf("%s writes field names that are not snake_case: %v", name, bad)
		}
		// The decision is an object on the API surfaces and termctl's
		// explanation is flat; either way the same names say the same things.
		d, _ := obj["decision"].(map[string]any)
		if d == nil {
			d = obj
		}
		h, _ := d["request_hash"].(string)
		hashes[h] = true
		if d["resolved_path"] != "/usr/bin/ls" && d["resolved_path"] != "/bin/ls" {
			t.Errorf("%s: resolved_path should name ls, got %v", name, d["resolved_path"])
		}
	}
	if len(hashes) != 1 || hashes[""] {
		t.Errorf("the three surfaces should name the same request_hash, got %v", hashes)
	}
}
