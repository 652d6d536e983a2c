package egress

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestListMatching(t *testing.T) {
	l, err := ParseList("dev", []string{"registry.npmjs.org", "*.example.com", "mirror.test:8080", "any.test:*", "10.1.2.3", "192.168.0.0/16:5000", "Proxy.Golang.Org."})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host string
		port uint16
		want string
	}{
		{"registry.npmjs.org", 443, ""},
		{"registry.npmjs.org", 80, ""},
		{"REGISTRY.npmjs.org.", 443, ""},
		{"registry.npmjs.org", 22, ReasonPortNotListed},
		{"evil-registry.npmjs.org", 443, ReasonNotListed},
		{"npmjs.org", 443, ReasonNotListed},
		{"a.example.com", 443, ""},
		{"a.b.example.com", 443, ""},
		{"example.com", 443, ReasonNotListed},    // the wildcard names what is beneath, not the apex
		{"badexample.com", 443, ReasonNotListed}, // not a label boundary
		{"mirror.test", 8080, ""},
		{"mirror.test", 443, ReasonPortNotListed},
		{"any.test", 1, ""},
		{"proxy.golang.org", 443, ""},
		{"10.1.2.3", 443, ReasonNotListed}, // addresses are not names
	}
	for _, c := range cases {
		if got := l.CheckName(c.host, c.port); got != c.want {
			t.Errorf("CheckName(%s, %d) = %q, want %q", c.host, c.port, got, c.want)
		}
	}
	addr := []struct {
		a    string
		port uint16
		want bool
	}{
		{"10.1.2.3", 443, true},
		{"::ffff:10.1.2.3", 80, true},
		{"10.1.2.3", 22, false},
		{"10.1.2.4", 443, false},
		{"192.168.7.7", 5000, true},
		{"192.168.7.7", 443, false},
	}
	for _, c := range addr {
		if got := l.AddressListed(netip.MustParseAddr(c.a), c.port); got != c.want {
			t.Errorf("AddressListed(%s, %d) = %t, want %t", c.a, c.port, got, c.want)
		}
	}
	if got := strings.Join(l.Hosts(), " "); got != "*.example.com 10.1.2.3 192.168.0.0/16:5000 any.test:* mirror.test:8080 proxy.golang.org registry.npmjs.org" {
		t.Errorf("Hosts() = %s", got)
	}
}

func TestListRefusesBadEntries(t *testing.T) {
	for entry, want := range map[string]string{
		"https://registry.npmjs.org": "not a URL",
		"foo.*.com":                  "wildcard may only be the whole first label",
		"host:99999":                 "not a number from 1 to 65535",
		"host:0":                     "not a number from 1 to 65535",
		"":                           "empty entry",
		"a..b":                       "empty label",
		"[::1":                       "unclosed",
		"bad host":                   "not a URL",
	} {
		_, err := ParseList("x", []string{entry})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "allow-list \"x\"") {
			t.Errorf("entry %q: err = %v, want one naming the list and saying %q", entry, err, want)
		}
	}
	if _, err := ParseList("a:b", nil); err == nil {
		t.Error("a list name with a colon was accepted")
	}
	if _, err := ParseList("d", DefaultLists()["registries"]); err != nil {
		t.Errorf("default registries list: %v", err)
	}
}

func TestPublic(t *testing.T) {
	for a, want := range map[string]bool{
		"1.1.1.1": true, "104.16.0.1": true, "2606:4700::1": true,
		"127.0.0.1": false, "10.0.0.1": false, "172.16.5.5": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "::1": false,
		"fe80::1": false, "fd00::1": false, "::ffff:127.0.0.1": false, "224.0.0.1": false,
		"::": false, "240.0.0.1": false,
	} {
		if got := Public(netip.MustParseAddr(a)); got != want {
			t.Errorf("Public(%s) = %t, want %t", a, got, want)
		}
	}
}

func TestAccountBounds(t *testing.T) {
	a := NewAccount()
	for i := 0; i < MaxDestinations+10; i++ {
		a.connect("h"+itoa(i), 443, "1.1.1.1")
	}
	for i := 0; i < MaxRefusals+5; i++ {
		a.refuse("r"+itoa(i), 443, ReasonNotListed, "")
	}
	if a.refuse("r"+itoa(0), 443, ReasonNotListed, "") {
		t.Fatal("a repeated refusal was reported as new")
	}
	s := a.Summary("l")
	if len(s.Destinations) != MaxDestinations || len(s.Refused) != MaxRefusals || s.Dropped != 15 {
		t.Fatalf("bounds: %d destinations, %d refusals, %d dropped; want %d, %d, 15", len(s.Destinations), len(s.Refused), s.Dropped, MaxDestinations, MaxRefusals)
	}
	if s.Refused[0].Host != "r000" || s.Refused[0].Count != 2 {
		t.Fatalf("first refusal %+v, want r000 counted twice", s.Refused[0])
	}
}

func itoa(i int) string { return fmt.Sprintf("%03d", i) }
