package harness

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Missing skips a focused developer run, and fails under `make test`
// (RequireEnv set), so CI cannot pass by not running a test.
func TestMissingFailsUnderMakeTest(t *testing.T) {
	if os.Getenv("HARNESS_MISSING_CHILD") == "1" {
		Missing(t, "frobnicator is not installed: run scripts/ci-deps.sh")
		return
	}
	run := func(env ...string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingFailsUnderMakeTest$", "-test.v")
		cmd.Env = append(os.Environ(), append([]string{"HARNESS_MISSING_CHILD=1", RequireEnv + "="}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	if err != nil || !strings.Contains(out, "--- SKIP") {
		t.Fatalf("without %s a missing component should skip: %v\n%s", RequireEnv, err, out)
	}
	out, err = run(RequireEnv + "=1")
	if err == nil || !strings.Contains(out, "--- FAIL") || !strings.Contains(out, "frobnicator is not installed") {
		t.Fatalf("with %s=1 a missing component should fail, naming it: %v\n%s", RequireEnv, err, out)
	}
}
