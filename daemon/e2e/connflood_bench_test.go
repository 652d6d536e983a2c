package e2e

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// TestBenchOperatorReachableUnderConnectFlood: eight agent processes of one
// uid connect to termd's socket and close at once, as fast as they can,
// while root runs `termctl status` 200 times and, at the same time, a
// second agent uid does the same. It prints how many of each succeeded (targets: root 99%,
// the second agent 90%) and the flood's connect rate. Run with `make bench`.
func TestBenchOperatorReachableUnderConnectFlood(t *testing.T) {
	if os.Getenv("TERMD_BENCH") == "" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	requireRoot(t)
	const agent2 = 61002
	d := harness.Start(t, harness.Options{Config: fmt.Sprintf("socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534, %d]\n", agent2)})
	var fl []*flooder
	for i := 0; i < 8; i++ {
		fl = append(fl, flood(t, d, harness.Nobody, 1, "loop"))
	}
	connects := func() int {
		n := 0
		for _, f := range fl {
			n += f.closed(t)
		}
		return n
	}
	time.Sleep(time.Second)
	start, c0 := time.Now(), connects()
	const calls = 200
	var rootTook, agentTook time.Duration
	round := func(cred *syscall.Credential) (ok int, last string) {
		began := time.Now()
		defer func() {
			if cred == nil {
				rootTook = time.Since(began) / calls
			} else {
				agentTook = time.Since(began) / calls
			}
		}()
		for i := 0; i < calls; i++ {
			_, errOut, code := d.RunAs(cred, "termctl", nil, "status")
			if code == 0 {
				ok++
			} else {
				last = errOut
			}
		}
		return ok, last
	}
	var rootOK, agentOK int
	var rootErr, agentErr string
	done := make(chan struct{})
	go func() { rootOK, rootErr = round(nil); close(done) }()
	agentOK, agentErr = round(&syscall.Credential{Uid: agent2, Gid: 65534})
	<-done
	rate := float64(connects()-c0) / time.Since(start).Seconds()
	for _, f := range fl {
		f.stop()
	}
	line := fmt.Sprintf("connect flood (8 agent processes of uid 65534, %.0f connects/s accepted): root `termctl status` %d/%d (%.1f%%, target >= 99%%, %v a call), a second agent uid %d/%d (%.1f%%, target >= 90%%, %v a call)",
		rate, rootOK, calls, 100*float64(rootOK)/calls, rootTook.Round(time.Millisecond), agentOK, calls, 100*float64(agentOK)/calls, agentTook.Round(time.Millisecond))
	harness.Bench(t, line)
	t.Log(line)
	if rootErr != "" {
		t.Logf("root's last failure: %s", rootErr)
	}
	if agentErr != "" {
		t.Logf("the second agent's last failure: %s", agentErr)
	}
}
