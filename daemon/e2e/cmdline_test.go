package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// --workspace takes a relative path like --socket does (relative to where
// termd was started).
func TestRelativeWorkspaceFlag(t *testing.T) {
	d := harness.Start(t, harness.Options{Args: []string{"--workspace", "."}})
	st, err := d.Client.Daemon.GetStatus(ctxT(t), &termdv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	found := false
	for _, w := range st.GetWorkspaces() {
		found = found || w == wd
	}
	if !found {
		t.Fatalf("--workspace . should add %s, workspaces are %v", wd, st.GetWorkspaces())
	}
}

// An unknown flag points to --help, for termd and termctl alike.
func TestUnknownFlagPointsToHelp(t *testing.T) {
	for _, c := range [][]string{{"termd", "--frobnicate"}, {"termctl", "--frobnicate", "status"}, {"termctl", "run", "--frobnicate"}} {
		out, _ := exec.Command(harness.Bin(t, c[0]), c[1:]...).CombinedOutput()
		if !strings.Contains(string(out), "unknown flag") || !strings.Contains(string(out), "--help`") {
			t.Errorf("%v: want the unknown flag named and a pointer to --help, got %q", c, out)
		}
	}
}
