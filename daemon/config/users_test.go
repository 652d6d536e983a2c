package config

import (
	"testing"
)

// Accounts are read once per few seconds, not once per RPC; SIGHUP
// (FlushUsers) makes the next call read the system's databases again.
func TestLookupUIDCaches(t *testing.T) {
	a, err := LookupUID(0)
	if err != nil {
		t.Fatal(err)
	}
	if a.User.Username != "root" {
		t.Fatalf("uid 0 is %q", a.User.Username)
	}
	if b, _ := LookupUID(0); b != a {
		t.Fatal("a second lookup within the TTL read the databases again")
	}
	FlushUsers()
	if b, _ := LookupUID(0); b == a || b.User.Username != "root" {
		t.Fatalf("after FlushUsers: %+v (same entry: %v)", b, b == a)
	}
	if _, err := LookupUID(4000000000); err == nil {
		t.Fatal("an unknown uid has no account")
	}
}
