package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestRunStdin: `echo ... | termctl run -- cat` gives the command its stdin
// (auto-detected pipe, or -i), --stdin=false keeps /dev/null; the receipt
// records its size and keyed digest (equal to the digest of cat's output);
// stdin past plans.max_stdin_bytes is refused naming the limit; different
// stdin is a different request hash; a plan's stdin is never echoed back in
// the plan; a plan with stdin survives a daemon crash before it runs; a
// replan after it ran says to plan with the input again.
func TestRunStdin(t *testing.T) {
	d := harness.Start(t, harness.Options{Config: "plans:\n  max_stdin_bytes: 4096\n"})
	type runOut struct {
		ExitCode  *int   `json:"exit_code"`
		Stdout    string `json:"stdout"`
		ReceiptID string `json:"receipt_id"`
		PlanID    string `json:"plan_id"`
	}
	termctlRun := func(input string, flags ...string) (runOut, string, int) {
		t.Helper()
		stdout, stderr, code := d.RunInput(strings.NewReader(input), "termctl", append(append([]string{"run", "-o", "json"}, flags...), "--", "cat")...)
		var out runOut
		if code == 0 {
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatalf("termctl run -o json: %v\n%s", err, stdout)
			}
		}
		return out, stderr, code
	}

	// A pipe is sent without a flag.
	const input = "hello stdin\nsecond line\n"
	out, stderr, code := termctlRun(input)
	if code != 0 || out.Stdout != input {
		t.Fatalf("echo | termctl run -- cat: exit %d stdout %q; want %q\n%s", code, out.Stdout, input, stderr)
	}
	rc := receiptJSON(t, d.Client, out.ReceiptID)
	in, _ := rc["stdin"].(map[string]any)
	if rc["schema_version"] != "1.7" || in["bytes"] != float64(len(input)) || in["sha256"] != rc["stdout_digest"] {
		t.Fatalf("receipt stdin %v (schema %v); want %d bytes and the digest of cat's output %v", in, rc["schema_version"], len(input), rc["stdout_digest"])
	}

	// -i reads stdin whatever it is; --stdin=false never does.
	if out, stderr, code := termctlRun("with -i\n", "-i"); code != 0 || out.Stdout != "with -i\n" {
		t.Fatalf("termctl run -i -- cat: exit %d stdout %q\n%s", code, out.Stdout, stderr)
	}
	out, stderr, code = termctlRun("not sent\n", "--stdin=false")
	if code != 0 || out.Stdout != "" {
		t.Fatalf("termctl run --stdin=false -- cat: exit %d stdout %q (cat must read /dev/null)\n%s", code, out.Stdout, stderr)
	}
	if _, has := receiptJSON(t, d.Client, out.ReceiptID)["stdin"]; has {
		t.Fatal("a run without stdin has a stdin member in its receipt")
	}

	// Past the limit: refused before anything is planned, naming the limit.
	big := strings.Repeat("x", 4097)
	if _, stderr, code := termctlRun(big); code != 125 || !strings.Contains(stderr, "plans.max_stdin_bytes") || !strings.Contains(stderr, "4.0 KiB") {
		t.Fatalf("stdin over plans.max_stdin_bytes: exit %d; want 125 and an error naming the limit:\n%s", code, stderr)
	}

	// The request hash binds the stdin by size and digest.
	planIn := func(stdin string) *termdv1.Plan {
		t.Helper()
		resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"cat"}, Stdin: []byte(stdin)}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Plan
	}
	a, a2, b, none := planIn("a\n"), planIn("a\n"), planIn("b\n"), planIn("")
	ha, hb, hn := a.Decision.RequestHash, b.Decision.RequestHash, none.Decision.RequestHash
	if ha != a2.Decision.RequestHash || ha == hb || ha == hn || hb == hn {
		t.Fatalf("request hashes: stdin a %s, a again %s, b %s, none %s; want equal for equal stdin and different otherwise", ha, a2.Decision.RequestHash, hb, hn)
	}
	if len(a.Request.GetStdin()) != 0 || a.Decision.GetStdin().GetBytes() != 2 || len(a.Decision.GetStdin().GetSha256()) != 64 || none.Decision.GetStdin() != nil {
		t.Fatalf("a plan must describe its stdin (bytes, sha256) and never echo it: request stdin %q, decision %v (none: %v)", a.Request.GetStdin(), a.Decision.GetStdin(), none.Decision.GetStdin())
	}
	if _, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"cat"}, Stdin: []byte("x"), Tty: &termdv1.TerminalOptions{}}}); err == nil || !strings.Contains(err.Error(), "tty") {
		t.Fatalf("stdin with a terminal: %v; want a refusal naming the tty", err)
	}

	// A plan with stdin survives a crash before it runs.
	d.Kill9()
	d.Restart()
	_, rec, stdout, stderrS := runToEnd(t, d.Client, b)
	if rec.GetStatus() != "succeeded" || stdout != "b\n" {
		t.Fatalf("plan with stdin after a restart: %s, stdout %q; want b\n%s", rec.GetStatus(), stdout, stderrS)
	}
	// It ran: its stdin is let go, and a replan says so.
	if _, err := d.Client.Plans.Replan(ctxT(t), &termdv1.ReplanRequest{PlanId: b.Id}); err == nil || !strings.Contains(err.Error(), "plan the command again with its input") {
		t.Fatalf("replan of a plan that ran with stdin: %v; want an error saying to plan again with the input", err)
	}
	// A replan of a plan that has not run carries its stdin.
	r, err := d.Client.Plans.Replan(ctxT(t), &termdv1.ReplanRequest{PlanId: a.Id})
	if err != nil {
		t.Fatal(err)
	}
	if r.Plan.Decision.RequestHash != ha {
		t.Fatalf("replan of a plan with stdin: hash %s, want %s", r.Plan.Decision.RequestHash, ha)
	}
	if _, _, stdout, _ := runToEnd(t, d.Client, r.Plan); stdout != "a\n" {
		t.Fatalf("replanned plan with stdin printed %q; want a", stdout)
	}
}
