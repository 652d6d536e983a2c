package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// homeProbe writes into $HOME and prints who it runs as and where HOME is.
const homeProbe = `touch "$HOME/.probe" && echo "$(id -u) $HOME"`

func TestAgentCommandRunsAsAgentWithPrivateHome(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{
		Config: "socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534]\n",
		Policy: testPolicy(fmt.Sprintf("  - {id: test.home, program: sh, exact: [sh, -c, %q], decision: allow, risk: high, reason: \"test: writes HOME\"}", homeProbe)),
	})
	out, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "plan", "-o", "json", "--", "sh", "-c", homeProbe)
	if code != 0 {
		t.Fatalf("agent plan: %d %s", code, errOut)
	}
	var p struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		Decision struct {
			RequestHash string `json:"request_hash"`
		} `json:"decision"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.ID == "" {
		t.Fatalf("plan JSON: %v\n%s", err, out)
	}
	if strings.Contains(strings.ToLower(p.State), "awaiting") {
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.ID, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = d.RunAs(harness.Nobody, "termctl", nil, "execute", p.ID, "--follow")
	if code != 0 {
		t.Fatalf("agent execute: exit %d\n%s%s", code, out, errOut)
	}
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != "65534" {
		t.Fatalf("the command should run as the agent's uid: %q", out)
	}
	home := f[1]
	if strings.HasPrefix(home, d.Workspace) || strings.HasPrefix(home, d.StateDir+"/") {
		t.Fatalf("HOME %s must be outside the workspace and the private state dir", home)
	}
	st, err := os.Stat(filepath.Join(home, ".probe"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Fatal("the file in HOME is not the agent's")
	}
	if hs, _ := os.Stat(home); hs.Mode().Perm() != 0o700 {
		t.Fatalf("HOME mode %v, want 0700", hs.Mode().Perm())
	}
}

// TestReceiptRecordsTheGidTheCommandRanWith: an agent whose process holds
// another gid than its account's when it connects (here 100) gets its
// command run with the account's gid; the receipt must say that gid, not
// the one of the requester's connection (issue 31 §4).
func TestReceiptRecordsTheGidTheCommandRanWith(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{
		Config: "socket_group: \"100\"\nroles:\n  agents:\n    uids: [65534]\n",
		Policy: testPolicy("  - {id: test.gid, program: id, exact: [id, -g], decision: allow, risk: low, reason: \"test: prints the gid\"}"),
	})
	agent := &syscall.Credential{Uid: 65534, Gid: 100}
	out, errOut, code := d.RunAs(agent, "termctl", nil, "run", "-o", "json", "--", "id", "-g")
	if code != 0 {
		t.Fatalf("agent run: %d %s%s", code, out, errOut)
	}
	var res struct {
		ReceiptID string `json:"receipt_id"`
		Stdout    string `json:"stdout"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.ReceiptID == "" {
		t.Fatalf("run JSON: %v\n%s", err, out)
	}
	ran := strings.TrimSpace(res.Stdout)
	r := receiptJSON(t, d.Client, res.ReceiptID)
	ra, _ := r["run_as"].(map[string]any)
	if ra == nil || fmt.Sprint(ra["gid"]) != ran || fmt.Sprint(ra["uid"]) != "65534" {
		t.Fatalf("the command ran with gid %q; the receipt says run_as %v", ran, r["run_as"])
	}
}
