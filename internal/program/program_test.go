package program

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A script run through env (#!/usr/bin/env NAME) needs NAME as found in the
// program's PATH, and what that needs in turn.
func TestExecFollowsEnv(t *testing.T) {
	if _, err := os.Stat("/usr/bin/env"); err != nil {
		t.Fatalf("/usr/bin/env: %v", err)
	}
	bin := t.TempDir()
	tool := filepath.Join(bin, "mytool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "run")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env -S PATHX=1 mytool --flag\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env, _ := filepath.EvalSymlinks("/usr/bin/env")
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	got := Exec(script, "/nonexistent", bin)
	for _, want := range []string{script, env, tool, sh} {
		if !slices.Contains(got, want) {
			t.Errorf("Exec(%s) = %v, missing %s", script, got, want)
		}
	}
	// Not in the search path: env's target is not added.
	if got := Exec(script, "/nonexistent"); slices.Contains(got, tool) {
		t.Errorf("a name outside the search path was added: %v", got)
	}
}
