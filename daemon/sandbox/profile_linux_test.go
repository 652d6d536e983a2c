package sandbox_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/daemon/sandbox/launcher"
)

// The launcher's Config is made from a profile in one place, sandbox.Prepare;
// the runner adds the command, its credentials and what a pre-started
// launcher needs. Every field of launcher.Config is one or the other (a new
// field fails here until it is placed), and a fully populated profile on a
// host that enforces everything sets every field Prepare owns.
func TestProfileToLaunchConfig(t *testing.T) {
	prepared := map[string]bool{"Mounts": true, "UserNS": true, "UserNSFD": true, "RulesetFD": true, "Seccomp": true, "NoNewPrivs": true, "DropCaps": true}
	byRunner := []string{"NetNSFD", "SayConfined", "HoldFilter", "MountNS", "Cwd", "SetNice", "Nice", "SetCred", "UID", "GID", "Groups", "Path", "Argv", "Env"}
	ct := reflect.TypeFor[launcher.Config]()
	for i := range ct.NumField() {
		if name := ct.Field(i).Name; !prepared[name] && !slices.Contains(byRunner, name) {
			t.Errorf("launcher.Config.%s is set neither by sandbox.Prepare nor by the runner: place it here", name)
		}
	}

	f := newFixture(t)
	target := filepath.Join(f.outside, "report.txt")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := domain.Profile{
		Profile:     domain.WorkspaceWrite,
		Network:     true,
		NetworkMode: "host",
		Exec:        []string{f.probe},
		Read:        []string{f.outside},
		Write:       []string{target},
		Cache:       []string{"~/.cache/probe"},
	}
	paths := f.paths
	root := os.Geteuid() == 0
	if root {
		paths.RootMap = sandbox.DefaultRootMapUID
	}
	l, rec, err := sandbox.Prepare(p, paths, sandbox.Required, f.sup)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cv := reflect.ValueOf(l.Config)
	for name := range prepared {
		switch {
		case name == "UserNS" && (root || !f.sup.UserNS):
			continue // termd makes the mount namespace itself
		case name == "DropCaps" && !root && f.sup.UserNS && len(l.Config.Mounts) == 0:
			continue // nothing to drop without root and a user namespace
		case name == "UserNSFD" && !root:
			continue // root is mapped only for a command run for root by a root termd
		}
		if cv.FieldByName(name).IsZero() {
			t.Errorf("launcher.Config.%s is not set from a full profile", name)
		}
	}
	kinds := map[string]bool{}
	for _, m := range l.Config.Mounts {
		kinds[m.Kind] = true
	}
	if !kinds["hide"] || !kinds["readonly"] || root && !kinds["idmap"] {
		t.Errorf("mounts %+v: want termd's files hidden, protected paths read-only (and, as root, the roots idmapped)", l.Config.Mounts)
	}
	if rec.Profile != p.Profile || rec.NetworkMode != p.NetworkMode || rec.Level != sandbox.LevelFull {
		t.Errorf("record %+v: want profile %s, network %s, full enforcement", rec, p.Profile, p.NetworkMode)
	}
}
