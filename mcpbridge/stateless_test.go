package mcpbridge_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The figure, unscaled: 3,000 stateless (2026-07-28) plan+execute
// pairs through one `termd-mcp --http` against a daemon with the default
// sessions.max_plans (1,000), and none fails. Every stateless client of the
// bridge shares its daemon session; before finished plans stopped counting
// (and the bridge rolled over a full session), every terminal_plan after the
// 1,000th failed until an operator closed the session. Clients come and go
// (a new client every 50 pairs) and a few run at once, as agents do; the
// command is the cheapest one (true) so that the pairs are the cost.
func TestStatelessBridgeServes3000Pairs(t *testing.T) {
	needRoot(t)
	const pairs, perClient, workers = 3000, 50, 3
	d := harness.Start(t, harness.Options{Config: agentConfig})
	hb := startHTTPBridge(t, d)
	start, cpu0 := time.Now(), pairCPU(d, hb)
	jobs := make(chan int)
	var (
		mu       sync.Mutex
		failed   []string
		sessions = map[string]bool{}
		lastPlan string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cs *mcp.ClientSession
			done := 0
			for i := range jobs {
				if cs == nil || done%perClient == 0 {
					if cs != nil {
						cs.Close()
					}
					var err error
					cs, err = connectStateless(hb)
					if err != nil {
						fail("pair %d: connect: %v", i, err)
						continue
					}
				}
				done++
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				plan, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "terminal_plan", Arguments: map[string]any{"argv": []string{"true"}}})
				if err != nil || plan.IsError {
					cancel()
					fail("pair %d: terminal_plan: %v %s", i, err, resultText(plan))
					continue
				}
				id, _ := plan.StructuredContent.(map[string]any)["plan_id"].(string)
				ex, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "terminal_execute", Arguments: map[string]any{"plan_id": id}})
				cancel()
				if err != nil || ex.IsError {
					fail("pair %d: terminal_execute %s: %v %s", i, id, err, resultText(ex))
					continue
				}
				if st, _ := ex.StructuredContent.(map[string]any)["state"].(string); st != "succeeded" {
					fail("pair %d: plan %s ended %q: %s", i, id, st, resultText(ex))
				}
				mu.Lock()
				lastPlan = id
				mu.Unlock()
				if i%500 == 0 {
					if p, err := d.Client.Plans.GetPlan(context.Background(), &termdv1.GetPlanRequest{PlanId: id}); err == nil {
						mu.Lock()
						sessions[p.GetPlan().GetSessionId()] = true
						mu.Unlock()
					}
				}
			}
			if cs != nil {
				cs.Close()
			}
		}()
	}
	for i := range pairs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(failed) > 0 {
		n := min(len(failed), 10)
		t.Fatalf("%d of %d pairs failed; the first %d:\n%v", len(failed), pairs, n, failed[:n])
	}
	wall, cpu := time.Since(start), pairCPU(d, hb)
	for i := range cpu {
		cpu[i] -= cpu0[i]
	}
	total := cpu[0] + cpu[1] + cpu[2]
	// A figure for the report, not an assertion: the CPU is what a quiet
	// 2-core CI machine needs at least (total/2), whatever the load here.
	t.Logf("%d stateless plan+execute pairs through one bridge (default max_plans, %d clients at once, a new client every %d pairs): wall %v, load %s; CPU termd+launchers %v, bridge %v, client %v = %v per pair, %v on 2 cores; daemon sessions seen %d, last plan %s",
		pairs, workers, perClient, wall.Round(time.Millisecond), loadAvg(), cpu[0].Round(time.Millisecond), cpu[1].Round(time.Millisecond), cpu[2].Round(time.Millisecond),
		(total / pairs).Round(10*time.Microsecond), (total / 2).Round(time.Millisecond), len(sessions), lastPlan)
}

// connectStateless connects a 2026-07-28 client to hb.
func connectStateless(hb *httpBridge) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "termd-e2e-stateless", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: hb.URL, HTTPClient: &http.Client{Transport: bearer{hb.Token, http.DefaultTransport}}}
	return c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	return text(res)
}

// pairCPU is the CPU time so far of termd with its reaped children (the
// launchers), the bridge, and this test process (the clients).
func pairCPU(d *harness.Daemon, hb *httpBridge) [3]time.Duration {
	var self syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	return [3]time.Duration{procCPU(d.Pid(), true), procCPU(hb.cmd.Process.Pid, false),
		time.Duration(self.Utime.Nano() + self.Stime.Nano())}
}

// procCPU reads utime+stime (and with children, cutime+cstime) of pid.
func procCPU(pid int, children bool) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	last := 12
	if children {
		last = 14
	}
	var ticks int64
	for i := 11; i <= last; i++ {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100
}

func loadAvg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
