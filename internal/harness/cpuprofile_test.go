package harness

import (
	"bytes"
	"runtime/pprof"
	"testing"
	"time"
)

//go:noinline
func spinForProfile(d time.Duration) (n int) {
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
	}
	return n
}

// A real CPU profile of this process, taken while one function spins, is
// parsed and the spinning function gets nearly all of it.
func TestParseCPUProfileAttributes(t *testing.T) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Fatal(err)
	}
	spinForProfile(400 * time.Millisecond)
	pprof.StopCPUProfile()
	p, err := ParseCPUProfile(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if p.Total < int64(100*time.Millisecond) || len(p.Samples) == 0 {
		t.Fatalf("profile of a 400 ms spin holds %d samples, %v", len(p.Samples), time.Duration(p.Total))
	}
	by := p.Attribute([]ProfileRule{
		{Name: "nothing", Prefixes: []string{"no/such.Function"}},
		{Name: "spin", Prefixes: []string{"github.com/termd/termd/internal/harness.spinForProfile"}},
	})
	if by["nothing"] != 0 || by["spin"] < p.Total/2 || by["spin"]+by["other"] != p.Total {
		t.Fatalf("attribution %v of %v", by, p.Total)
	}
	if _, err := ParseCPUProfile([]byte("not a profile")); err == nil {
		t.Fatal("garbage parsed as a profile")
	}
}
