package policyjson

import (
	"slices"
	"strings"
	"testing"
)

func TestProfileValidate(t *testing.T) {
	for _, name := range []string{ReadOnly, WorkspaceWrite} {
		if err := (Profile{Profile: name}).Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (Profile{}).Validate(); err == nil || !strings.Contains(err.Error(), "no sandbox profile") {
		t.Errorf("no name: %v", err)
	}
	if err := (Profile{Profile: "full-access"}).Validate(); err == nil || !strings.Contains(err.Error(), `unknown sandbox profile "full-access"`) {
		t.Errorf("unknown name: %v", err)
	}
}

// Cache entries are "~/…" local paths beneath the private HOME; anything
// else names no cache directory and grants nothing.
func TestProfileCacheDirs(t *testing.T) {
	p := Profile{Cache: []string{"~/.cache/go-build", "~/a/./b/", "/etc", "~/../escape", "cache", "~/", "~//abs"}}
	if got, want := p.CacheDirs(), []string{".cache/go-build", "a/b"}; !slices.Equal(got, want) {
		t.Errorf("CacheDirs = %q, want %q", got, want)
	}
}

// A grant compares profiles: an empty list is none, any other difference is
// a different profile.
func TestProfileEqual(t *testing.T) {
	a := Profile{Profile: ReadOnly, Exec: []string{"/bin/ls"}, Read: []string{}}
	if !a.Equal(Profile{Profile: ReadOnly, Exec: []string{"/bin/ls"}, Cache: []string{}}) {
		t.Error("empty and absent lists differ")
	}
	for _, b := range []Profile{
		{Profile: WorkspaceWrite, Exec: []string{"/bin/ls"}},
		{Profile: ReadOnly, Exec: []string{"/bin/cat"}},
		{Profile: ReadOnly, Exec: []string{"/bin/ls"}, NetworkMode: "host"},
		{Profile: ReadOnly, Exec: []string{"/bin/ls"}, Write: []string{"/tmp/x"}},
	} {
		if a.Equal(b) {
			t.Errorf("%+v equals %+v", a, b)
		}
	}
}
