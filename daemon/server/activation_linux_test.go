//go:build linux

package server

import (
	"os"
	"testing"
)

// Without LISTEN_FDS, or when LISTEN_PID names another process, termd makes
// its own socket; the variables never reach commands either way.
func TestActivatedIgnoresForeignOrMissingVariables(t *testing.T) {
	t.Setenv("LISTEN_FDS", "")
	if l, op, err := Activated(); l != nil || op != nil || err != nil {
		t.Fatalf("no LISTEN_FDS: %v %v %v", l, op, err)
	}
	t.Setenv("LISTEN_FDS", "1")
	t.Setenv("LISTEN_PID", "1")
	if l, op, err := Activated(); l != nil || op != nil || err != nil {
		t.Fatalf("LISTEN_PID of another process: %v %v %v", l, op, err)
	}
	if os.Getenv("LISTEN_FDS") != "" || os.Getenv("LISTEN_PID") != "" {
		t.Fatal("LISTEN_* left in the environment")
	}
}
