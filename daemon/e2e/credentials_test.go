package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// gitServer serves a bare repository over smart HTTP (git http-backend
// through net/http/cgi) behind Basic auth whose password must be the
// current content of tokenFile.
func gitServer(t *testing.T, tokenFile string) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		harness.Missing(t, "git is not installed: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		harness.Missing(t, "git http-backend is missing: %v", err)
	}
	root := t.TempDir()
	src := filepath.Join(root, "src")
	for _, args := range [][]string{
		{"init", "-q", src},
		{"-C", src, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
		{"clone", "-q", "--bare", src, filepath.Join(root, "repo.git")},
	} {
		if b, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
	}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	var mu sync.Mutex
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		want, _ := os.ReadFile(tokenFile)
		if _, pass, ok := r.BasicAuth(); !ok || pass != strings.TrimSpace(string(want)) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "token required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/repo.git"
}

// restGateway starts termd-gateway (operator token) in front of d and
// returns a function that GETs or POSTs a REST path and returns the body.
func restGateway(t *testing.T, d *harness.Daemon) func(method, path, body string) string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "gateway.token")
	cmd := exec.Command(harness.Bin(t, "termd-gateway"), "--socket", d.Socket, "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), "url=http://"); ok {
				select {
				case base <- "http://" + strings.Fields(u)[0]:
				default:
				}
			}
		}
	}()
	var root string
	select {
	case root = <-base:
	case <-time.After(60 * time.Second):
		t.Fatal("termd-gateway did not start")
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, root+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s\n%s", method, path, resp.Status, b)
		}
		return string(b)
	}
}

// fileProbe reads an inject: file credential with shell builtins only.
const fileProbe = `echo "path $FILE_TOKEN"; IFS= read -r v < "$FILE_TOKEN"; echo "value $v"`

// credHelper is the run user's git credential helper: it answers git with
// the token from GH_TOKEN, and (to prove redaction) also prints the value
// and its base64 on stderr, which git passes through.
const credHelper = `#!/bin/sh
test "$1" = get || exit 0
echo "helper sees $GH_TOKEN" >&2
printf 'helper b64 %s\n' "$(printf 'x-access-token:%s' "$GH_TOKEN" | base64 -w0)" >&2
echo username=x-access-token
echo "password=$GH_TOKEN"
`

// A plan receiving GH_TOKEN runs git ls-remote against a server that needs
// the token; the value appears on no surface; the agent cannot get it into
// another program or ask for another principal's credential; rotation takes
// effect on the next execution; a group-readable file is refused.
func TestCredentialByReference(t *testing.T) {
	d, tokenFile, token, url := startCredentialDaemon(t)
	agent := func(args ...string) (string, string, int) {
		return d.RunAs(harness.Nobody, "termctl", nil, args...)
	}
	var surfaces bytes.Buffer // everything a person or an agent could read
	show := func(what string, s string) { fmt.Fprintf(&surfaces, "\n== %s\n%s", what, s) }
	ctx := ctxT(t)
	rest := restGateway(t, d)
	show("REST credentials", rest("GET", "/v1/credentials", ""))
	// REST takes the field too (an operator's plan through the gateway).
	viaREST := rest("POST", "/v1/plans", `{"request":{"argv":["git","ls-remote",`+strconv.Quote(url)+`],"credentials":["GH_TOKEN"]}}`)
	show("REST plan create", viaREST)
	if !strings.Contains(viaREST, `"credentials":["GH_TOKEN"]`) || !strings.Contains(viaREST, "PLAN_STATE_AWAITING_APPROVAL") {
		t.Fatalf("a plan through REST with a credential:\n%s", viaREST)
	}

	// termctl credentials: the agent sees GH_TOKEN, not the operator's, and
	// names and programs only: not where the secrets live.
	out, errOut, code := agent("credentials")
	show("agent credentials", out+errOut)
	if code != 0 || !strings.Contains(out, "GH_TOKEN") || strings.Contains(out, "OPS_TOKEN") || strings.Contains(out, tokenFile) || strings.Contains(out, "store") {
		t.Fatalf("agent's credentials list (exit %d):\n%s%s", code, out, errOut)
	}
	ops, err := d.Client.Policy.ListCredentials(ctx, &termdv1.ListCredentialsRequest{})
	if err != nil || len(ops.Credentials) != 3 || !ops.Credentials[0].Readable {
		t.Fatalf("operator's list: %v %v", ops, err)
	}
	show("operator credentials", protojson.Format(ops))

	// Plan, approve, run: git authenticates with the token.
	cr := credRig{d: d, url: url, agent: agent, show: show, rest: rest}
	runGit := func() (planID, receiptID string) { return cr.runGit(t) }
	planID, receiptID := runGit()
	ctx = ctxT(t)
	rc := receiptJSON(t, d.Client, receiptID)
	if fmt.Sprint(rc["credentials"]) != "[GH_TOKEN]" || rc["schema_version"] != "1.7" {
		t.Fatalf("the receipt must name the credential: %v (schema %v)", rc["credentials"], rc["schema_version"])
	}
	got, _ := d.Client.Plans.GetPlan(ctx, &termdv1.GetPlanRequest{PlanId: planID})
	for _, s := range []termdv1.OutputStream{termdv1.OutputStream_OUTPUT_STREAM_STDOUT, termdv1.OutputStream_OUTPUT_STREAM_STDERR} {
		ro, err := d.Client.Executions.ReadOutput(ctx, &termdv1.ReadOutputRequest{ExecutionId: got.Plan.ExecutionId, Stream: s})
		if err != nil {
			t.Fatal(err)
		}
		show("ReadOutput", string(ro.Data))
	}

	checkCredentialRouting(t, cr)

	// Rotation: the next execution reads the new value (the server now
	// wants it), and the new value is redacted too.
	rotated := "plainvalue" + strings.Repeat("Rt9", 12)
	if err := os.WriteFile(tokenFile, []byte(rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, receipt2 := runGit()

	checkFileCredential(t, cr)

	checkGroupReadableRefused(t, cr, tokenFile)

	checkNoCredentialLeaks(t, cr, &surfaces, []string{receiptID, receipt2}, []string{token, rotated})
}

// startCredentialDaemon starts a daemon with three credentials read from one
// token file (GH_TOKEN for git, OPS_TOKEN for root only, FILE_TOKEN injected
// as a file for sh), a git server over HTTP wanting the token (url), and the
// policy's git settings adding a credential helper for that URL.
func startCredentialDaemon(t *testing.T) (d *harness.Daemon, tokenFile, token, url string) {
	requireRoot(t)
	if _, err := exec.LookPath("git"); err != nil {
		harness.Missing(t, "git is not installed")
	}
	secrets := t.TempDir()
	if err := os.Chmod(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	tokenFile = filepath.Join(secrets, "gh_token")
	token = "plainvalue" + strings.Repeat("Zq7", 12) // no secret shape: only the credential redactor can catch it
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url = gitServer(t, tokenFile)
	// git runs with no global or system config and its credential helpers
	// reset (-c credential.helper=), so a workspace cannot run one. The
	// operator's policy adds a helper for one URL after that reset
	// (docs/CREDENTIALS.md, "git"); it reads the token from GH_TOKEN.
	helperDir, err := os.MkdirTemp("", "termd-git-helper-") // t.TempDir's parent is 0700: the agent's uid could not reach it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(helperDir) })
	if err := os.Chmod(helperDir, 0o755); err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(helperDir, "git-credential-termd-test")
	if err := os.WriteFile(helper, []byte(credHelper), 0o755); err != nil {
		t.Fatal(err)
	}
	// What docs/CREDENTIALS.md shows an operator adding to git's forced
	// settings (its spec resets credential.helper first).
	pol := string(policy.DefaultYAML())
	const at = "\nprograms:\n"
	if !strings.Contains(pol, at) {
		t.Fatalf("the default policy no longer has %q; update this test", at)
	}
	pol = strings.Replace(pol, at, at+"  git:\n    sandbox_exec: [/bin, /usr/bin, "+helperDir+"]\n    exec_args: [-c, \"credential."+url+".helper="+helper+"\"]\n", 1)
	pol += fmt.Sprintf("  - {id: test.credfile, program: sh, exact: [sh, -c, %q], decision: allow, risk: high, reason: \"test: reads an injected credential file\"}\n", fileProbe)
	d = harness.Start(t, harness.Options{Policy: pol, Config: `socket_group: "65534"
roles:
  agents:
    uids: [65534]
credentials:
  - name: GH_TOKEN
    file: ` + tokenFile + `
    programs: [git]
  - name: OPS_TOKEN
    file: ` + tokenFile + `
    principals: {uids: [0]}
  - name: FILE_TOKEN
    file: ` + tokenFile + `
    programs: [sh]
    inject: file
`})
	return d, tokenFile, token, url
}

// credRig is TestCredentialByReference's daemon and its moves: termctl as
// the agent, the gateway's REST API, and show, which collects everything a
// person or an agent could read for the final search for the secret.
type credRig struct {
	d     *harness.Daemon
	url   string
	agent func(args ...string) (string, string, int)
	show  func(what string, s string)
	rest  func(method, path, body string) string
}

// runGit plans git ls-remote with GH_TOKEN as the agent, checks the plan
// asks and the operator's surfaces name the credential, approves it, and
// runs it: git authenticates, the helper's echo of the value is redacted.
func (r credRig) runGit(t *testing.T) (planID, receiptID string) {
	d, url, agent, show, rest := r.d, r.url, r.agent, r.show, r.rest
	ctx := ctxT(t) // each step its own time budget: the whole test can outlast one
	t.Helper()
	out, errOut, code := agent("plan", "-o", "json", "--credential", "GH_TOKEN", "--", "git", "ls-remote", url)
	show("agent plan", out+errOut)
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	p := printedPlan(t, d, out)
	if p.State != termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL || strings.Join(p.GetDecision().GetCredentials(), ",") != "GH_TOKEN" {
		t.Fatalf("a plan receiving a credential must ask in confirm mode: %v %v", p.State, p.GetDecision().GetReasons())
	}
	pend, pendErr, _ := d.Run("termctl", "pending")
	show("operator pending", pend+pendErr)
	if !strings.Contains(pend, "credentials:") || !strings.Contains(pend, "GH_TOKEN") {
		t.Fatalf("termctl pending must show the credential's name:\n%s", pend)
	}
	// The console's approval page reads these REST routes.
	queue := rest("GET", "/v1/plans?states=PLAN_STATE_AWAITING_APPROVAL&limit=200", "")
	show("REST approval queue", queue)
	show("REST plan", rest("GET", "/v1/plans/"+p.Id, ""))
	if !strings.Contains(queue, `"credentials":["GH_TOKEN"]`) {
		t.Fatalf("the approval queue must show the credential's name:\n%s", queue)
	}
	if _, err := d.Client.Plans.ApprovePlan(ctx, &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = agent("execute", p.Id, "--follow")
	show("agent execute", out+errOut)
	if code != 0 || !strings.Contains(out, "refs/heads/") {
		t.Fatalf("git ls-remote with the credential: exit %d\nstdout:\n%s\nstderr:\n%s\n%s", code, out, errOut, d.Log())
	}
	if !strings.Contains(errOut, "helper sees [REDACTED]") {
		t.Fatalf("the helper's echo of the value should show redacted:\n%s", errOut)
	}
	got, err := d.Client.Plans.GetPlan(ctx, &termdv1.GetPlanRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	show("plan view", protojson.Format(got))
	return p.Id, got.Plan.ReceiptId
}

// checkCredentialRouting: the agent cannot route the credential to another
// program, nor ask for another principal's credential.
func checkCredentialRouting(t *testing.T, r credRig) {
	url, agent, show := r.url, r.agent, r.show
	// The agent cannot route the credential to another program, nor ask
	// for another principal's credential: the same answer as for a name
	// that does not exist.
	out, errOut, _ := agent("plan", "--credential", "GH_TOKEN", "--", "curl", "-s", url)
	show("curl plan", out+errOut)
	if !strings.Contains(out+errOut, "credential GH_TOKEN is available only to git; this plan runs curl") {
		t.Fatalf("curl with GH_TOKEN:\n%s%s", out, errOut)
	}
	notMine, _, _ := agent("plan", "--credential", "OPS_TOKEN", "--", "git", "ls-remote", url)
	missing, _, _ := agent("plan", "--credential", "NOPE_TOKEN", "--", "git", "ls-remote", url)
	show("not mine", notMine+missing)
	reasons := func(out, name string) string { // the plan's reasons, with the name made neutral
		_, r, _ := strings.Cut(out, "reasons:")
		r, _, _ = strings.Cut(r, "next:")
		return strings.ReplaceAll(r, name, "NAME")
	}
	if !strings.Contains(notMine, "credential OPS_TOKEN is not defined for you") || reasons(notMine, "OPS_TOKEN") != reasons(missing, "NOPE_TOKEN") {
		t.Fatalf("another principal's credential must look like a missing one:\n%s\n---\n%s", notMine, missing)
	}
	if !strings.Contains(notMine, "state:        blocked") {
		t.Fatalf("the plan should be blocked:\n%s", notMine)
	}
}

// checkFileCredential: with inject: file the variable names a private file
// holding the value, gone when the execution ends.
func checkFileCredential(t *testing.T, r credRig) {
	d, agent, show := r.d, r.agent, r.show
	ctx := ctxT(t)
	// inject: file: the variable names a file in the execution's private
	// TMPDIR holding the value; the file is gone when the execution ends.
	out, errOut, code := agent("plan", "-o", "json", "--mode", "confirm", "--credential", "FILE_TOKEN", "--", "sh", "-c", fileProbe)
	if code != 0 {
		t.Fatalf("file credential plan: exit %d\n%s%s", code, out, errOut)
	}
	fp := printedPlan(t, d, out)
	if _, err := d.Client.Plans.ApprovePlan(ctx, &termdv1.ApprovePlanRequest{PlanId: fp.Id, RequestHash: fp.Decision.RequestHash}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = agent("execute", fp.Id, "--follow")
	show("file credential run", out+errOut)
	path, _, _ := strings.Cut(strings.TrimPrefix(out, "path "), "\n")
	if code != 0 || !strings.Contains(out, "value [REDACTED]") || !strings.Contains(path, "/.tmp/") || !strings.HasSuffix(path, "/termd-credential-FILE_TOKEN") {
		t.Fatalf("inject: file: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the credential file %s outlived its execution: %v", path, err)
	}
}

// checkGroupReadableRefused: a group-readable credential file refuses the
// execution, naming file, mode and fix, and the list says it is unreadable.
func checkGroupReadableRefused(t *testing.T, r credRig, tokenFile string) {
	d, url, agent, show := r.d, r.url, r.agent, r.show
	ctx := ctxT(t)
	// A group-readable credential file is refused, naming file, mode, fix.
	if err := os.Chmod(tokenFile, 0o640); err != nil {
		t.Fatal(err)
	}
	out, errOut, _ := agent("plan", "-o", "json", "--credential", "GH_TOKEN", "--", "git", "ls-remote", url)
	p := printedPlan(t, d, out)
	if _, err := d.Client.Plans.ApprovePlan(ctx, &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := agent("execute", p.Id, "--follow")
	show("refused", out+errOut)
	if code == 0 || !strings.Contains(errOut, tokenFile+" has mode 0640") || !strings.Contains(errOut, "chmod 600 "+tokenFile) {
		t.Fatalf("a group-readable credential file must refuse the execution clearly: exit %d\n%s%s", code, out, errOut)
	}
	lst, _, _ := agent("credentials")
	show("credentials after chmod", lst)
	if !strings.Contains(lst, "NO: ") {
		t.Fatalf("credentials list should say the source is not readable:\n%s", lst)
	}
}

// checkNoCredentialLeaks collects every surface (events of every session,
// the receipts receiptIDs, the export, the daemon's log) into surfaces and
// checks no value of secrets is in it, in any form.
func checkNoCredentialLeaks(t *testing.T, r credRig, surfaces *bytes.Buffer, receiptIDs, secrets []string) {
	d, show := r.d, r.show
	ctx := ctxT(t)
	// Every surface: events of every session, receipts (exported JSON
	// too), the daemon's log.
	ectx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	evs, err := d.Client.Events.StreamEvents(ectx, &termdv1.StreamEventsRequest{History: true})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := evs.Recv()
		if err != nil {
			break
		}
		b, _ := protojson.Marshal(m)
		show("event", string(b))
	}
	for _, id := range receiptIDs {
		b, _ := json.Marshal(receiptJSON(t, d.Client, id))
		show("receipt", string(b))
	}
	exp, expErr, _ := d.Run("termctl", "receipts", "export", "--all")
	show("receipts export", exp+expErr)
	show("daemon log", d.Log())
	all := surfaces.String()
	if !strings.Contains(all, "refs/heads/") || !strings.Contains(all, "EVENT_KIND_OUTPUT") {
		t.Fatalf("the surfaces collected lack the run's output or events; the search below would prove nothing:\n%s", all)
	}
	for _, v := range secrets {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.StdEncoding.EncodeToString([]byte("x-access-token:" + v))[8:40]} {
			if i := strings.Index(all, form); i >= 0 {
				t.Fatalf("a credential (form %q) leaked:\n%s", form, all[max(0, i-400):min(len(all), i+200)])
			}
		}
	}
}

// printedPlan is the plan `termctl plan -o json` printed (its id read from
// the output, the plan itself from the daemon).
func printedPlan(t *testing.T, d *harness.Daemon, out string) *termdv1.Plan {
	t.Helper()
	var printed struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &printed); err != nil || printed.ID == "" {
		t.Fatalf("termctl plan -o json printed no plan (%v):\n%s", err, out)
	}
	got, err := d.Client.Plans.GetPlan(ctxT(t), &termdv1.GetPlanRequest{PlanId: printed.ID})
	if err != nil {
		t.Fatal(err)
	}
	return got.Plan
}
