package broker

import (
	"reflect"
	"slices"
	"testing"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/broker/wire"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/sandbox"
)

// fullProfile sets every field of domain.Profile (TestProfileConversions
// checks that it does, so a new field must be added here).
func fullProfile() domain.Profile {
	return domain.Profile{
		Profile:     domain.WorkspaceWrite,
		Network:     true,
		NetworkMode: "host",
		Exec:        []string{"/usr/bin/go", "/usr/lib/go/pkg/tool"},
		Read:        []string{"/opt/sdk"},
		Write:       []string{"/srv/out/report.txt"},
		Cache:       []string{"~/.cache/go-build", "~/go/pkg/mod"},
	}
}

// A fully populated profile survives each conversion the daemon makes of
// it: every field of each target is set (a field added to a target that no
// conversion fills fails here, as does a profile field the conversion drops),
// and every target field named like a profile field holds the profile's
// value. Fields a target takes from the host, not the profile, are named
// with the reason; the launcher's Config is checked in daemon/sandbox
// (TestProfileToLaunchConfig), where termd-launch is built.
func TestProfileConversions(t *testing.T) {
	p := fullProfile()
	if z := zeroFields(p); len(z) > 0 {
		t.Fatalf("fullProfile leaves %v unset: set every field of domain.Profile", z)
	}
	// The record sandbox.Prepare makes from the profile (under sandbox: off
	// it enforces nothing, so what it holds comes from the profile and the
	// mode alone).
	_, rec, err := sandbox.Prepare(p, sandbox.Paths{}, sandbox.Off, sandbox.Support{Platform: "linux-landlock"})
	if err != nil {
		t.Fatal(err)
	}
	enforced := rec
	enforced.Level, enforced.Mode, enforced.LandlockABI = sandbox.LevelPartial, sandbox.BestEffort, 7
	enforced.Seccomp, enforced.MountNS, enforced.CapsDropped, enforced.RootMappedTo = true, true, true, sandbox.DefaultRootMapUID
	enforced.Missing = []string{"signal scoping"}

	cases := []struct {
		name string
		out  any
		// host: target fields that are not the profile's, and why.
		host map[string]string
	}{
		{name: "proto", out: wire.SandboxProto(p), host: map[string]string{
			"Enforcement": "the daemon's enforcement level (plan.go sets it from SandboxLevel)",
		}},
		{name: "sandbox record", out: rec, host: map[string]string{
			"LandlockABI":  "what Landlock enforced: nothing under sandbox: off",
			"Seccomp":      "what the host enforced: nothing under sandbox: off",
			"MountNS":      "what the host enforced: nothing under sandbox: off",
			"CapsDropped":  "what the host enforced: nothing under sandbox: off",
			"RootMappedTo": "the host uid a root run held (sandbox.Paths.RootMap)",
		}},
		{name: "enforced record", out: enforced},
		{name: "receipt", out: executions.ReceiptSandbox(&enforced, true)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := reflect.Indirect(reflect.ValueOf(c.out))
			for name := range c.host {
				if !v.FieldByName(name).IsValid() {
					t.Errorf("%s has no field %s: drop it from the host fields", v.Type(), name)
				}
			}
			for _, name := range zeroFields(c.out) {
				if c.host[name] == "" {
					t.Errorf("%s.%s is not set from a fully populated profile", v.Type(), name)
				}
			}
			pv := reflect.ValueOf(p)
			for i := range pv.NumField() {
				name := pv.Type().Field(i).Name
				target := v.FieldByName(name)
				if !target.IsValid() {
					continue
				}
				want := pv.Field(i).Interface()
				if got := target.Interface(); !reflect.DeepEqual(got, want) {
					t.Errorf("%s.%s = %#v, want the profile's %#v", v.Type(), name, got, want)
				}
			}
		})
	}
	// The profile's own fields are the canonical request's: its JSON names
	// (hashed into request_hash, journaled) stay as they were.
	var names []string
	for i := range reflect.TypeFor[domain.Profile]().NumField() {
		names = append(names, reflect.TypeFor[domain.Profile]().Field(i).Tag.Get("json"))
	}
	want := []string{"profile", "network", "network_mode,omitempty", "exec,omitempty", "read,omitempty", "write,omitempty", "cache,omitempty"}
	if !slices.Equal(names, want) {
		t.Errorf("domain.Profile JSON names %q, want %q (changing them changes every request hash)", names, want)
	}
}

// zeroFields names the exported fields of struct v (or *v) that hold their
// zero value.
func zeroFields(v any) []string {
	rv := reflect.Indirect(reflect.ValueOf(v))
	var out []string
	for i := range rv.NumField() {
		if f := rv.Type().Field(i); f.IsExported() && rv.Field(i).IsZero() {
			out = append(out, f.Name)
		}
	}
	return out
}
