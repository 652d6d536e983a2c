package executions_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/broker/hostfs"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/events"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	"github.com/termd/termd/daemon/sandbox"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// launchRig is executions.Launches on real parts: a policy engine with the
// default policy, the host file system part (homes and TMPDIRs under a
// temporary state directory), real keys, an event bus and the runner.
type launchRig struct {
	*executions.Launches
	cfg    *config.Config
	ws     string
	fs     *hostfs.FS
	runner *runner.Runner
}

// agent is the requester: commands run as it when termd is root.
var agent = &termdv1.Principal{Uid: 65534, Gid: 65534, Name: "nobody", Role: termdv1.Role_ROLE_AGENT}

func newLaunchRig(t *testing.T) *launchRig {
	t.Helper()
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	dir, _ = filepath.EvalSymlinks(dir)
	ws, state := filepath.Join(dir, "ws"), filepath.Join(dir, "state")
	for _, d := range []string{ws, state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(state, 0o700)
	_ = os.Chmod(ws, 0o777) // the agent's commands run as uid 65534
	polPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(polPath, policy.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, err := policy.NewEngine(polPath)
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "token")
	if err := os.WriteFile(secret, []byte("tok-3a9f1c77e2b54d0e\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.StateDir, cfg.Workspaces = state, []string{ws}
	cfg.Sandbox = string(sandbox.Off) // the kernel sandbox has its own tests (daemon/sandbox, daemon/e2e)
	cfg.Credentials = []config.Credential{
		{Name: "API_TOKEN", File: secret},
		{Name: "API_TOKEN_FILE", File: secret, Inject: "file"},
	}
	keys, err := receiptstore.LoadOrCreateKeys(filepath.Join(state, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	conf := func() *config.Config { return cfg }
	fs := hostfs.New(hostfs.Deps{Config: conf, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redactor: receiptstore.NewRedactor(),
		Protected: func() []string { return []string{state} }})
	run, err := runner.New("")
	if err != nil {
		t.Fatal(err)
	}
	l := executions.NewLaunches(executions.Deps{Config: conf, Policy: eng, Sandbox: sandbox.Probe("/nonexistent/termd-launch"),
		Keys: keys, Redactor: receiptstore.NewRedactor(), Bus: events.New(events.Options{}), Files: fs, MkdirOwned: hostfs.MkdirOwned})
	return &launchRig{Launches: l, cfg: cfg, ws: ws, fs: fs, runner: run}
}

// start is an execution with no network of its own and no terminal.
func start(id string) executions.Start {
	return executions.Start{ID: id, PlanID: "plan-" + id, SessionID: "session-" + id, Requester: agent, Term: "dumb",
		Network:  func() (executions.Network, error) { return executions.Network{NSFD: -1}, nil },
		Terminal: func() *runner.TTY { return nil }}
}

// run starts spec on the runner and returns its result and raw stdout.
func (r *launchRig) run(t *testing.T, spec runner.Spec) (runner.Result, string) {
	t.Helper()
	proc, err := r.runner.Start(spec)
	if spec.Stdin != nil {
		spec.Stdin.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	res := proc.Wait()
	out, _, _ := proc.ReadOutput(runner.Stdout, 0, 1<<20)
	return res, string(out)
}

// spawn starts execution id of decision d on the runner, its TMPDIR
// removed when the test ends.
func (r *launchRig) spawn(t *testing.T, s *executions.Setup, d policy.Decision, id string) *runner.Process {
	t.Helper()
	spec, err := r.Spec(s, d, start(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.RemoveTmp)
	proc, err := r.runner.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	return proc
}

// A spec built from a decision runs the command with everything its setup
// holds: the plan's stdin on descriptor 0 (let go of once opened), the
// environment termd sets (its trusted PATH, a private HOME and TMPDIR, the
// execution's ids) over the request's, its credentials by value and by
// file, a git identity, and the policy's default time limit. Its live
// output events are redacted of the credential; the TMPDIR is gone after
// RemoveTmp.
func TestSpecRunsTheCommandWithItsSetup(t *testing.T) {
	r := newLaunchRig(t)
	in := []byte("from stdin\n")
	script := `cat; echo "tmp=$TMPDIR"; echo "home=$HOME"; echo "path=$PATH"; echo "ids=$TERMD_SESSION_ID $TERMD_PLAN_ID $TERMD_EXECUTION"
echo "foo=$FOO term=$TERM"; echo "token=$API_TOKEN"; echo "file=$(cat "$API_TOKEN_FILE")"; echo "git=$GIT_CONFIG_SYSTEM"`
	d := policy.Decision{Argv: []string{"sh", "-c", script}, ResolvedPath: "/bin/sh", Cwd: r.ws,
		Env: map[string]string{"FOO": "bar", "PATH": "/not/this"}, Sandbox: domain.Profile{Profile: domain.WorkspaceWrite},
		Credentials: []string{"API_TOKEN", "API_TOKEN_FILE"}, Stdin: &policy.Stdin{Bytes: int64(len(in)), SHA256: r.Keys.Digest(in)}}
	r.Bus.Publish("session-x1", termdv1.EventKind_EVENT_KIND_SESSION_CREATED, nil) // the session's events begin
	sub, err := r.Bus.Subscribe("session-x1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	s := &executions.Setup{Redactor: r.Redactor, Stdin: in}
	spec, err := r.Spec(s, d, start("x1"))
	if err != nil {
		t.Fatal(err)
	}
	res, out := r.run(t, spec)
	if res.Status != runner.StatusSucceeded {
		t.Fatalf("the command ended %s (%v): %s", res.Status, res.Err, out)
	}
	uid := 65534 // as its requester
	if os.Geteuid() != 0 {
		uid = os.Geteuid() // as termd's user
	}
	home := filepath.Join(r.fs.Base(), strconv.Itoa(uid))
	want := []string{"from stdin", "tmp=" + s.Tmp, "path=" + executions.JoinPath(r.Policy.Current().TrustedPath()),
		"ids=session-x1 plan-x1 x1", "foo=bar term=dumb", "token=tok-3a9f1c77e2b54d0e", "file=tok-3a9f1c77e2b54d0e",
		"git=" + filepath.Join(s.Tmp, "termd-gitconfig")}
	for _, w := range want {
		if !slices.Contains(strings.Split(out, "\n"), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "home="+home) {
		t.Errorf("HOME is not the private home under %s:\n%s", home, out)
	}
	if s.Tmp == "" || !strings.HasPrefix(s.Tmp, r.fs.Base()) {
		t.Errorf("TMPDIR %q is not under %s", s.Tmp, r.fs.Base())
	}
	if s.Stdin != nil || !slices.Equal(s.Credentials, d.Credentials) || s.GitIdentity == nil || s.Timeout != r.Policy.Current().Limits().DefaultTimeout {
		t.Errorf("setup after the spec: stdin %q, credentials %v, git identity %v, timeout %s", s.Stdin, s.Credentials, s.GitIdentity, s.Timeout)
	}
	if spec.ID != "x1" || !spec.NoNetwork || spec.JoinNetNS || spec.NetNSFD != -1 || spec.KeepTail {
		t.Errorf("spec id %q, no network %v, join %v (fd %d), keep tail %v", spec.ID, spec.NoNetwork, spec.JoinNetNS, spec.NetNSFD, spec.KeepTail)
	}
	// The live events: redacted, and all of stdout.
	for _, ls := range s.Out {
		if ls != nil {
			ls.Close()
		}
	}
	var live string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !strings.Contains(live, "git=") {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("live output so far %q: %v", live, err)
		}
		if o := ev.GetOutput(); o != nil && o.Stream == termdv1.OutputStream_OUTPUT_STREAM_STDOUT {
			if o.ExecutionId != "x1" || o.Offset != int64(len(live)) {
				t.Fatalf("output event of %q at %d, want x1 at %d", o.ExecutionId, o.Offset, len(live))
			}
			live += string(o.Data)
		}
	}
	if strings.Contains(live, "tok-3a9f1c77e2b54d0e") || !strings.Contains(live, "from stdin") {
		t.Errorf("live output is not the redacted output:\n%s", live)
	}
	tmp := s.Tmp
	s.RemoveTmp()
	if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) || s.Tmp != "" {
		t.Errorf("after RemoveTmp: %s: %v (Tmp %q)", tmp, err, s.Tmp)
	}
}

// A plan whose stdin termd no longer holds as planned (another size or
// digest) is refused before anything runs, saying to plan it again.
func TestSpecRefusesStdinItNoLongerHolds(t *testing.T) {
	r := newLaunchRig(t)
	d := policy.Decision{Argv: []string{"cat"}, ResolvedPath: "/bin/cat", Cwd: r.ws, Sandbox: domain.Profile{Profile: domain.WorkspaceWrite},
		Stdin: &policy.Stdin{Bytes: 3, SHA256: r.Keys.Digest([]byte("abc"))}}
	for _, held := range [][]byte{nil, []byte("abd"), []byte("abcd")} {
		s := &executions.Setup{Redactor: r.Redactor, Stdin: held}
		_, err := r.Spec(s, d, start("x2"))
		if errdefs.KindOf(err) != errdefs.KindPrecondition || !strings.Contains(err.Error(), "plan the command again with its input") {
			t.Errorf("stdin %q held for a plan of \"abc\": %v", held, err)
		}
		s.RemoveTmp()
	}
}

// The network is joined after the run-as user is found and before HOME and
// the TMPDIR are made: a run-as user that does not exist joins nothing, a
// network that cannot be joined leaves no TMPDIR, and what was joined is
// what the spec runs with (the namespace, the egress proxy's environment,
// and why the network fell back, in the sandbox record).
func TestSpecJoinsItsNetworkInOrder(t *testing.T) {
	r := newLaunchRig(t)
	d := policy.Decision{Argv: []string{"true"}, ResolvedPath: "/bin/true", Cwd: r.ws, Sandbox: domain.Profile{Profile: domain.WorkspaceWrite}}
	joined := 0
	in := start("x3")
	in.Network = func() (executions.Network, error) {
		joined++
		return executions.Network{}, errdefs.Unavailable("no loopback here")
	}
	if os.Geteuid() == 0 {
		ru := d
		ru.RunAs = "termd-no-such-user"
		if _, err := r.Spec(&executions.Setup{Redactor: r.Redactor}, ru, in); err == nil || joined != 0 {
			t.Fatalf("an unknown run-as user: %v, network joined %d times", err, joined)
		}
	}
	s := &executions.Setup{Redactor: r.Redactor}
	if _, err := r.Spec(s, d, in); errdefs.KindOf(err) != errdefs.KindUnavailable || joined != 1 || s.Tmp != "" || s.Sandbox != nil {
		t.Fatalf("a network that cannot be joined: %v (joined %d), TMPDIR %q", err, joined, s.Tmp)
	}
	in.Network = func() (executions.Network, error) {
		return executions.Network{Loopback: true, Egress: true, NSFD: 7, EgressEnv: map[string]string{"HTTPS_PROXY": "http://127.0.0.1:3128"}, Fallback: "the workspace loopback is missing"}, nil
	}
	spec, err := r.Spec(s, d, in)
	if err != nil {
		t.Fatal(err)
	}
	defer s.RemoveTmp()
	if spec.NoNetwork || !spec.JoinNetNS || spec.NetNSFD != 7 || !slices.Contains(spec.Env, "HTTPS_PROXY=http://127.0.0.1:3128") {
		t.Errorf("spec network: none %v, join %v (fd %d), env %v", spec.NoNetwork, spec.JoinNetNS, spec.NetNSFD, spec.Env)
	}
	if s.Sandbox == nil || !slices.Contains(s.Sandbox.Missing, "the workspace loopback is missing") {
		t.Errorf("sandbox record %+v lacks the network's fallback", s.Sandbox)
	}
}
