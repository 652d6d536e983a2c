package mcpbridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/termd/termd/internal/harness"
)

// latencyRow is one row of the latency account: the floor's step and
// termd's stage set against each other (either "" where the side has
// none), and the guarantee termd's extra time there buys.
type latencyRow struct {
	name, floor, termd string
	why                string // "" where the floor does the same work; "=" a row whose parts follow, "^" the pair
}

// latencyRows lay a pair's time out in order: the two MCP calls as the
// client saw them, and inside each the daemon's part (termd's
// /debug/stages, the floor broker's Steps) and what is outside it (the MCP
// server, gRPC, HTTP: the call's median less the daemon's). Medians do not
// add up exactly; the indented rows are parts of the row above.
var latencyRows = []latencyRow{
	{"plan call (client)", "call/plan", "call/plan", "="},
	{"  in the daemon: plan", "resolve", "plan", "a policy decision at plan; the plan journalled + fsynced before it is answered (no plan lost by a crash)"},
	{"  outside the daemon", "outside/plan", "outside/plan", ""},
	{"execute call (client)", "call/execute", "call/execute", "="},
	{"  check", "", "check", "the policy re-checked at execute (a stale plan refused); the command's spec (env, limits, sandbox)"},
	{"  intent (append + fsync)", "intent", "intent", "= the floor's; termd's holds the receipt's draft (a crash still ends in a signed outcome_unknown)"},
	{"    intent/encode", "", "intent/encode", ""},
	{"    intent/wait (hand-offs)", "", "intent/wait", ""},
	{"    intent/apply (BEGIN, insert)", "", "intent/apply", ""},
	{"    intent/commit (WAL, fsync)", "", "intent/commit", ""},
	{"  launch (beside the intent)", "", "launch", "its cgroup, pipes; sandboxed: a pre-started confined launcher (off the path: overlaps the intent)"},
	{"  release..exit seen", "run", "release+run", "="},
	{"    release (intent durable..exec)", "", "release", "sandbox: off: fork+exec (the floor's run does it too); sandboxed: the launcher's go-ahead"},
	{"    exit (exec..exit seen)", "", "exit", ""},
	{"    teardown", "", "teardown", "nothing the command started outlives it (cgroup killed); output read to its end"},
	{"  receipt", "receipt", "receipt", "="},
	{"    receipt/encode", "", "receipt/encode", "the receipt's canonical encoding and schema check"},
	{"    receipt/wait (hand-offs)", "", "receipt/wait", ""},
	{"    receipt/apply (seal, insert)", "", "receipt/apply", "the hash chain and the signatures (seq, prev_hash, ed25519 + HMAC)"},
	{"    receipt/commit (WAL, fsync)", "", "receipt/commit", ""},
	{"  total (execute..receipt)", "execute", "total", "="},
	{"  settle (receipt..end told)", "", "settle", "the final state and events to every watching client (live events)"},
	{"  outside the daemon", "outside/execute", "outside/execute", ""},
	{"pair (client)", "call/pair", "call/pair", "^"},
}

// stagesWindow is how many executions termd's /debug/stages and the floor
// broker's Steps report on (stages.Window; the floor's stepsKept).
const stagesWindow = 512

// latencyTable prints the latency account of TestBenchGuarantees: sides
// are the floor, termd and termd-nosb (and any other termd, a column
// more); calls their modern pairs' plan and execute call times.
func latencyTable(t *testing.T, sides []*server, calls [][][2]time.Duration) {
	vals := make([]map[string]time.Duration, len(sides))
	for i, s := range sides {
		var plan, exec, pair []time.Duration
		cs := calls[i]
		cs = cs[max(0, len(cs)-stagesWindow):] // the pairs the daemons' figures are over
		for _, c := range cs {
			plan, exec, pair = append(plan, c[0]), append(exec, c[1]), append(pair, c[0]+c[1])
		}
		var v map[string]time.Duration
		if s.termd {
			v = parseMedians(fetch(t, "http://"+s.debug+"/debug/stages"))
			v["release+run"] = v["release"] + v["run"]
			v["outside/execute"] = harness.Pct(exec, 50) - v["total"] - v["settle"]
		} else {
			v = parseMedians(floorSteps(t, s.sock))
			v["plan"] = v["resolve"]
			v["outside/execute"] = harness.Pct(exec, 50) - v["execute"]
		}
		v["call/plan"], v["call/execute"], v["call/pair"] = harness.Pct(plan, 50), harness.Pct(exec, 50), harness.Pct(pair, 50)
		v["outside/plan"] = v["call/plan"] - v["plan"]
		vals[i] = v
	}
	harness.Bench(t, "latency: medians per modern pwd pair over each side's last 512 (the daemons' parts from termd's /debug/stages, the floor broker's Steps); nosb-floor is termd-nosb's extra time")
	head := fmt.Sprintf("latency: %-36s", "part")
	for _, s := range sides {
		head += fmt.Sprintf(" %10s", s.name)
	}
	harness.Bench(t, head+fmt.Sprintf(" %10s  %s", "nosb-floor", "the guarantee it buys"))
	cell := func(v map[string]time.Duration, key string) string {
		if d, ok := v[key]; ok && key != "" {
			return ms(d).String()
		}
		return "-"
	}
	for _, r := range latencyRows {
		f, okf := vals[0][r.floor]
		n, okn := vals[2][r.termd]
		diff := "-"
		if okn && (okf || r.floor == "") {
			diff = ms(n - f).String()
		}
		why := r.why
		switch why {
		case "":
			why = "(the floor does the same work)"
		case "=":
			why = "(its parts below)"
		case "^":
			why = "(the two calls above)"
		}
		line := fmt.Sprintf("latency: %-36s %10s", r.name, cell(vals[0], r.floor))
		for _, v := range vals[1:] {
			line += fmt.Sprintf(" %10s", cell(v, r.termd))
		}
		harness.Bench(t, line+fmt.Sprintf(" %10s  %s", diff, why))
	}
}

// parseMedians reads "name p50 p90" lines (termd's /debug/stages, the
// floor's Steps) into name -> p50.
func parseMedians(report string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, l := range strings.Split(report, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		if d, err := time.ParseDuration(f[1]); err == nil {
			out[f[0]] = d
		}
	}
	return out
}

// floorSteps asks the floor broker at sock for its steps' report.
func floorSteps(t *testing.T, sock string) string {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out wrapperspb.StringValue
	if err := conn.Invoke(context.Background(), "/floor.Broker/Steps", wrapperspb.String(""), &out); err != nil {
		t.Fatalf("the floor's steps: %v", err)
	}
	return out.Value
}
