package executions

import (
	"os/user"
	"slices"
	"strconv"
	"testing"
)

// CredentialFor gives a uid's account (through the RPCs' account cache), a
// user name's account, and a uid without an account as itself; anything
// else is an error naming it.
func TestCredentialFor(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	root, err := user.LookupId("0")
	if err != nil {
		t.Fatal(err)
	}
	rootGroups, _ := root.GroupIds()
	for _, who := range []string{"0", "0", "root"} { // the second "0" comes from the cache
		c, err := CredentialFor(who)
		if err != nil || c.Uid != 0 || c.Gid != 0 || len(c.Groups) != len(rootGroups) {
			t.Fatalf("CredentialFor(%q) = %+v, %v; want root with groups %v", who, c, err, rootGroups)
		}
		for _, g := range rootGroups {
			n, _ := strconv.ParseUint(g, 10, 32)
			if !slices.Contains(c.Groups, uint32(n)) {
				t.Fatalf("CredentialFor(%q) groups %v, want %v", who, c.Groups, rootGroups)
			}
		}
	}
	for _, who := range []string{nobody.Uid, "nobody"} {
		c, err := CredentialFor(who)
		if err != nil || strconv.FormatUint(uint64(c.Uid), 10) != nobody.Uid || strconv.FormatUint(uint64(c.Gid), 10) != nobody.Gid {
			t.Fatalf("CredentialFor(%q) = %+v, %v; want nobody (%s:%s)", who, c, err, nobody.Uid, nobody.Gid)
		}
	}
	if c, err := CredentialFor("4242424"); err != nil || c.Uid != 4242424 || c.Gid != 4242424 || len(c.Groups) != 0 {
		t.Fatalf("a uid without an account: %+v, %v", c, err)
	}
	if _, err := CredentialFor("termd-no-such-user"); err == nil {
		t.Fatal("an unknown user name was accepted")
	}
}
