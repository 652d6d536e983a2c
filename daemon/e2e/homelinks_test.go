package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/fstree"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// termd, as root, makes cache directories in the agent's private HOME and
// removes its TMPDIRs. These tests are the agent: it plants links there, or
// swaps them in while termd works, aiming at a root-owned victim directory
// outside. Nothing in the victim may be created, chowned, chmodded or
// removed.

// whereProbe prints the command's HOME and TMPDIR and, in its TMPDIR, leaves
// links at the victim for termd's removal of the TMPDIR to meet.
const whereProbe = `echo "$HOME"; echo "$TMPDIR"; ln -s %[1]s "$TMPDIR/link"; mkdir "$TMPDIR/d"; ln -s %[1]s/file "$TMPDIR/d/file"; ln -s %[1]s/pkg "$TMPDIR/d/pkg"`

// linkPolicy: `true` has two cache directories under HOME, as `go` has
// (~/go/pkg/mod is one of go's); whereProbe runs at once.
func linkPolicy(t *testing.T, victim string) string {
	pol := testPolicy(fmt.Sprintf("  - {id: test.where, program: sh, exact: [sh, -c, %q], decision: allow, risk: low, reason: \"test: prints HOME and TMPDIR\"}", fmt.Sprintf(whereProbe, victim)))
	const at = "\nprograms:\n"
	if !strings.Contains(pol, at) {
		t.Fatal("the default policy has no programs section any more; update linkPolicy")
	}
	return strings.Replace(pol, at, at+"  \"true\":\n    sandbox_cache: [\"~/go/pkg/mod\", \"~/.cache/deep/er/cache\"]\n", 1)
}

// victimDir is a root-owned directory outside every tree of the agent's,
// shaped so that the cache paths would land in it through a link at ~/go
// (pkg/) or ~/.cache (deep/er/).
func victimDir(t *testing.T) string {
	v, err := os.MkdirTemp("", "termd-victim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(v) })
	for _, d := range []string{"pkg", "deep/er"} {
		if err := os.MkdirAll(filepath.Join(v, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(v, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v, "file"), []byte("victim"), 0o644); err != nil {
		t.Fatal(err)
	}
	return v
}

// asAgent runs a command as the agent's uid (the agent's own shell).
func asAgent(t *testing.T, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: harness.Nobody}
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v as the agent: %v\n%s", argv, err, out)
	}
}

// tryRun plans and executes argv as c; it reports the execution's stdout,
// or the refusal.
func tryRun(t *testing.T, d *harness.Daemon, c *client.Client, argv ...string) (string, error) {
	t.Helper()
	resp, err := c.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: argv}})
	if err != nil {
		t.Fatalf("plan %q: %v", argv, err)
	}
	switch p := resp.Plan; p.State {
	case termdv1.PlanState_PLAN_STATE_PLANNED:
	case termdv1.PlanState_PLAN_STATE_AWAITING_APPROVAL: // the operator approves
		if _, err := d.Client.Plans.ApprovePlan(ctxT(t), &termdv1.ApprovePlanRequest{PlanId: p.Id, RequestHash: p.Decision.RequestHash}); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("plan %q: %v %v", argv, p.State, p.Decision.GetReasons())
	}
	ex, err := c.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: resp.Plan.Id})
	if err != nil {
		return "", err
	}
	fin := waitFinal(t, d.Client, ex.Execution.Id)
	if fin.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
		return "", fmt.Errorf("execution %s: %v %s", fin.Id, fin.State, fin.Error)
	}
	out, err := d.Client.Executions.ReadOutput(ctxT(t), &termdv1.ReadOutputRequest{ExecutionId: fin.Id})
	if err != nil {
		t.Fatal(err)
	}
	return string(out.GetData()), nil
}

// linkRig starts termd with linkPolicy and returns the victim, the daemon,
// the agent's client, and the agent's HOME and (removed) TMPDIR.
func linkRig(t *testing.T) (victim string, d *harness.Daemon, agent *client.Client, home, tmp string) {
	t.Helper()
	requireRoot(t)
	victim = victimDir(t)
	d = harness.Start(t, harness.Options{Config: agentConfig, Policy: linkPolicy(t, victim)})
	agent = agentClient(t, d, harness.Nobody)
	home, tmp = agentHome(t, d, agent, victim)
	return victim, d, agent, home, tmp
}

// agentHome runs whereProbe as the agent and returns its HOME and TMPDIR.
func agentHome(t *testing.T, d *harness.Daemon, c *client.Client, victim string) (home, tmp string) {
	t.Helper()
	out, err := tryRun(t, d, c, "sh", "-c", fmt.Sprintf(whereProbe, victim))
	if err != nil {
		t.Fatalf("whereProbe: %v", err)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		t.Fatalf("whereProbe printed %q", out)
	}
	return f[0], f[1]
}

// Links the agent plants in its private HOME before an execution, and in
// its TMPDIR during one, lead termd to nothing outside: no directory made or
// given away in the victim, nothing there removed; termd refuses with what
// to fix, and runs again once the links are gone.
func TestPlantedLinksInPrivateHomeRedirectNothing(t *testing.T) {
	victim, d, agent, home, tmp := linkRig(t)
	if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the TMPDIR %s is still there after its execution: %v", tmp, err)
	}
	before := fstree.Take(t, victim)
	// ~/go -> victim: ~/go/pkg/mod would be victim/pkg/mod. ~/.cache is a
	// real directory with a link one level down.
	asAgent(t, "ln", "-s", victim, filepath.Join(home, "go"))
	asAgent(t, "mkdir", "-p", filepath.Join(home, ".cache"))
	asAgent(t, "ln", "-s", filepath.Join(victim, "deep"), filepath.Join(home, ".cache", "deep"))
	for i := 0; i < 3; i++ {
		_, err := tryRun(t, d, agent, "true")
		if err == nil {
			t.Error("an execution ran with links in place of its cache directories")
		} else if !strings.Contains(err.Error(), "remove it from the private HOME") {
			t.Errorf("the refusal does not say what to fix: %v", err)
		}
		agentHome(t, d, agent, victim) // links in a TMPDIR, removed by termd
	}
	fstree.Unchanged(t, "victim", before, fstree.Take(t, victim))
	// The agent removes its links: executions run, and the caches are its.
	asAgent(t, "rm", filepath.Join(home, "go"), filepath.Join(home, ".cache", "deep"))
	if _, err := tryRun(t, d, agent, "true"); err != nil {
		t.Fatalf("after the links were removed: %v", err)
	}
	for _, c := range []string{"go/pkg/mod", ".cache/deep/er/cache"} {
		st, err := os.Lstat(filepath.Join(home, c))
		if err != nil || !st.IsDir() || st.Sys().(*syscall.Stat_t).Uid != harness.Nobody.Uid {
			t.Errorf("cache %s: %v %v, want a directory of the agent's", c, st, err)
		}
	}
	fstree.Unchanged(t, "victim", before, fstree.Take(t, victim))
}

// While executions run, the agent flips ~/go between its real directory and
// a link to the victim, and ~/.cache/deep likewise, without pause. termd
// makes each execution's cache directories in whatever it finds: never in
// the victim.
func TestLinkSwapsDuringExecutionsRedirectNothing(t *testing.T) {
	victim, d, agent, home, _ := linkRig(t)
	before := fstree.Take(t, victim)
	// Real directories of the agent's, and links beside them.
	asAgent(t, "mkdir", "-p", filepath.Join(home, "go", "pkg"), filepath.Join(home, ".cache", "deep", "er"))
	asAgent(t, "ln", "-s", victim, filepath.Join(home, "go.link"))
	asAgent(t, "ln", "-s", filepath.Join(victim, "deep"), filepath.Join(home, ".cache", "deep.link"))
	goDir, err := os.Open(filepath.Join(home, "go"))
	if err != nil {
		t.Fatal(err)
	}
	defer goDir.Close()
	deepDir, err := os.Open(filepath.Join(home, ".cache", "deep"))
	if err != nil {
		t.Fatal(err)
	}
	defer deepDir.Close()
	// Between swaps, what termd made in the real directories is removed
	// through their own descriptors, so each execution makes it again.
	unmake := func(dir *os.File, made string) func() {
		return func() { _ = unix.Unlinkat(int(dir.Fd()), made, unix.AT_REMOVEDIR) }
	}
	swappers := []*fstree.Swapper{
		fstree.Swap(filepath.Join(home, "go"), filepath.Join(home, "go.link"), unmake(goDir, "pkg/mod")),
		fstree.Swap(filepath.Join(home, ".cache", "deep"), filepath.Join(home, ".cache", "deep.link"), unmake(deepDir, "er/cache")),
	}
	const executions = 150
	ran, refused := 0, 0
	for i := 0; i < executions; i++ {
		if _, err := tryRun(t, d, agent, "true"); err != nil {
			refused++
		} else {
			ran++
		}
	}
	var swaps int64
	for _, sw := range swappers {
		n, err := sw.Stop()
		if err != nil {
			t.Errorf("swap: %v", err)
		}
		swaps += n
	}
	t.Logf("%d executions (%d ran, %d refused) under %d swaps", executions, ran, refused, swaps)
	fstree.Unchanged(t, "victim", before, fstree.Take(t, victim))
	if swaps < 1000 {
		t.Errorf("only %d swaps: the race was hardly run", swaps)
	}
}

// Another local user creates, first, the name a termd whose state directory
// is inside a workspace used for its commands' homes in the temporary
// directory (termd-home-<euid>), as a directory of its own or as a link to
// one. termd neither uses it nor refuses executions; nor does it adopt a
// base it recorded once that another user made again after a clean-up.
func TestHomeBaseInTempDirIsNotTakenByOtherUsers(t *testing.T) {
	requireRoot(t)
	for _, kind := range []string{"directory", "link"} {
		t.Run(kind, func(t *testing.T) {
			victim := victimDir(t)
			shared, err := os.MkdirTemp("", "termd-shared-tmp-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(shared) })
			if err := os.Chmod(shared, 0o1777); err != nil { // like /tmp
				t.Fatal(err)
			}
			// The other user's own directory, and its squat on the name.
			theirs := filepath.Join(shared, "theirs")
			asAgent(t, "mkdir", theirs)
			fixed := filepath.Join(shared, fmt.Sprintf("termd-home-%d", os.Geteuid()))
			if kind == "directory" {
				asAgent(t, "mkdir", "-m", "0777", fixed)
			} else {
				asAgent(t, "ln", "-s", theirs, fixed)
			}
			ws, err := os.MkdirTemp("", "termd-ws-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(ws) })
			if err := os.Chmod(ws, 0o755); err != nil { // the agent's commands work in it
				t.Fatal(err)
			}
			state := filepath.Join(ws, ".termd-state")
			d := harness.Start(t, harness.Options{
				Config: agentConfig,
				Policy: linkPolicy(t, victim),
				Env:    []string{"TMPDIR=" + shared},
				// The state directory inside a workspace: its sibling would
				// be too, so the homes go to the temporary directory.
				Args: []string{"--state-dir", state, "--workspace", ws},
			})
			agent := agentClient(t, d, harness.Nobody)
			home, _ := agentHome(t, d, agent, victim)
			checkBase := func() string {
				t.Helper()
				base := filepath.Dir(home)
				if filepath.Dir(base) != shared || base == fixed || strings.HasPrefix(home, theirs) {
					t.Fatalf("HOME %s is not in a base of termd's own in %s", home, shared)
				}
				st, err := os.Lstat(base)
				if err != nil || !st.IsDir() || st.Sys().(*syscall.Stat_t).Uid != 0 || st.Mode().Perm() != 0o711 {
					t.Fatalf("base %s: %v %v, want termd's 0711 directory", base, st, err)
				}
				if _, err := tryRun(t, d, agent, "true"); err != nil {
					t.Fatalf("an execution with the base in %s: %v", base, err)
				}
				return base
			}
			base := checkBase()
			if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
				t.Errorf("termd wrote into the other user's directory: %v", ents)
			}
			// Restarted, termd keeps its base.
			d.Stop()
			d.Restart()
			agent = agentClient(t, d, harness.Nobody)
			if home, _ = agentHome(t, d, agent, victim); filepath.Dir(home) != base {
				t.Errorf("after a restart HOME is %s, want it in %s again", home, base)
			}
			// A clean-up of the temporary directory removes it, and the other
			// user makes a directory of that name: termd does not adopt it.
			d.Stop()
			if err := os.RemoveAll(base); err != nil {
				t.Fatal(err)
			}
			asAgent(t, "mkdir", "-m", "0777", base)
			d.Restart()
			agent = agentClient(t, d, harness.Nobody)
			home, _ = agentHome(t, d, agent, victim)
			if filepath.Dir(home) == base {
				t.Fatalf("termd adopted %s, made again by another user", base)
			}
			checkBase()
			if ents, _ := os.ReadDir(base); len(ents) != 0 {
				t.Errorf("termd wrote into the other user's %s: %v", base, ents)
			}
		})
	}
}
