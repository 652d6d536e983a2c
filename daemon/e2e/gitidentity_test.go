package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestGitCommitIdentity: `git commit` in a fresh repository (no
// user.name, no user.email anywhere) works through termd with the
// principal's git_identity entry, or "NAME (via termd) <NAME@HOST>" by
// default; the receipt records it; a repository's own user.name/email and
// GIT_AUTHOR_*/GIT_COMMITTER_* in the request still win.
func TestGitCommitIdentity(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		harness.Missing(t, "git is not installed: %v", err)
	}
	d := harness.Start(t, harness.Options{Config: `git_identity:
  "0": {name: "Ops Root", email: ops@example.com}
`})
	ws := d.Workspace
	n := 0
	gitHere := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", ws}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitHere("init", "-q")
	// commit plans and runs `git commit` through termd and returns the
	// receipt and the author and committer git recorded.
	commit := func(env map[string]string) (map[string]any, string) {
		t.Helper()
		n++
		name := filepath.Join(ws, "f"+strings.Repeat("x", n)+".txt")
		if err := os.WriteFile(name, []byte("change\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitHere("add", name)
		resp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{
			Argv: []string{"git", "commit", "-q", "-m", "change"}, Cwd: ws, Env: env}})
		if err != nil {
			t.Fatal(err)
		}
		_, rec, stdout, stderr := runToEnd(t, d.Client, resp.Plan)
		if rec.Status != "succeeded" {
			t.Fatalf("git commit through termd: %s\n%s%s", rec.Status, stdout, stderr)
		}
		return receiptJSON(t, d.Client, rec.Id), gitHere("log", "-1", "--format=%an <%ae>|%cn <%ce>")
	}

	rc, who := commit(nil)
	if who != "Ops Root <ops@example.com>|Ops Root <ops@example.com>" {
		t.Fatalf("the commit's author|committer: %q; want the git_identity entry", who)
	}
	gi, _ := rc["git_identity"].(map[string]any)
	if gi["name"] != "Ops Root" || gi["email"] != "ops@example.com" || gi["source"] != "config" || rc["schema_version"] != "1.7" {
		t.Fatalf("receipt git_identity %v (schema %v)", rc["git_identity"], rc["schema_version"])
	}

	// The request's own identity wins, and the receipt records none.
	rc, who = commit(map[string]string{"GIT_AUTHOR_NAME": "Req A", "GIT_AUTHOR_EMAIL": "a@req.example", "GIT_COMMITTER_NAME": "Req C", "GIT_COMMITTER_EMAIL": "c@req.example"})
	if who != "Req A <a@req.example>|Req C <c@req.example>" || rc["git_identity"] != nil {
		t.Fatalf("with the request's identity: %q, receipt git_identity %v", who, rc["git_identity"])
	}

	// A repository's own identity wins over termd's (lowest precedence).
	gitHere("config", "user.name", "Repo Person")
	gitHere("config", "user.email", "repo@example.com")
	if _, who = commit(nil); who != "Repo Person <repo@example.com>|Repo Person <repo@example.com>" {
		t.Fatalf("with a repository identity: %q", who)
	}
	gitHere("config", "--unset", "user.name")
	gitHere("config", "--unset", "user.email")

	// git run by a build (make), not planned itself: the identity is the
	// system config there (HOME's ~/.gitconfig would still apply over it).
	if err := os.WriteFile(filepath.Join(ws, "Makefile"), []byte("c:\n\tgit commit -q --allow-empty -m viamake\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitHere("add", "Makefile")
	gitHere("-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "-m", "makefile")
	mp, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"make", "-s", "c"}, Cwd: ws}})
	if err != nil {
		t.Fatal(err)
	}
	if mp.Plan.State == termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL {
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: mp.Plan.Id, RequestHash: mp.Plan.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	}
	_, mrec, mout, merr := runToEnd(t, d.Client, mp.Plan)
	mrc := receiptJSON(t, d.Client, mrec.Id)
	if who := gitHere("log", "-1", "--format=%an <%ae>|%s"); mrec.Status != "succeeded" || who != "Ops Root <ops@example.com>|viamake" || mrc["git_identity"] == nil {
		t.Fatalf("git commit run by make: %s %q (receipt git_identity %v)\n%s%s", mrec.Status, who, mrc["git_identity"], mout, merr)
	}

	// No entry for the principal: NAME (via termd) <NAME@HOST>.
	if err := os.WriteFile(d.ConfigPath, []byte(strings.Replace(readFile(t, d.ConfigPath), `"0": {name: "Ops Root", email: ops@example.com}`, `"4242": {name: "Someone Else", email: else@example.com}`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Stop()
	d.Restart()
	host, _ := os.Hostname()
	rc, who = commit(nil)
	want := "root (via termd) <root@" + host + ">"
	if who != want+"|"+want {
		t.Fatalf("default identity: %q; want %q", who, want)
	}
	gi, _ = rc["git_identity"].(map[string]any)
	if gi["name"] != "root (via termd)" || gi["email"] != "root@"+host || gi["source"] != "default" {
		t.Fatalf("receipt git_identity %v", rc["git_identity"])
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
