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

// What a program needs is read again when the file changed, even when its
// size and mtime stay the same (the answer is cached per file version).
func TestExecSeesAChangedFile(t *testing.T) {
	script := filepath.Join(t.TempDir(), "run")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	ls, _ := filepath.EvalSymlinks("/bin/ls")
	write("#!/bin/sh\n")
	fi, err := os.Stat(script)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := Exec(script); !slices.Contains(got, sh) {
			t.Fatalf("Exec = %v, want %s in it", got, sh)
		}
	}
	write("#!/bin/ls\n") // same size
	if err := os.Chtimes(script, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got := Exec(script); !slices.Contains(got, ls) || slices.Contains(got, sh) {
		t.Fatalf("after the rewrite Exec = %v, want %s and not %s", got, ls, sh)
	}
}

func BenchmarkExec(b *testing.B) {
	for b.Loop() {
		Exec("/usr/bin/pwd")
	}
}
