package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// otlpHost is one termd "host" exporting to the test collector.
type otlpHost struct {
	name    string
	d       *harness.Daemon
	metrics string // metrics_listen address
}

// runSome runs n commands on h and returns their receipt ids.
func (h *otlpHost) runSome(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		ex, rec, _, _ := runToEnd(t, h.d.Client, plan(t, h.d.Client, "", "echo", h.name, strconv.Itoa(i)))
		if ex.State != termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED {
			t.Fatalf("%s: echo ended %s", h.name, ex.State)
		}
		ids = append(ids, rec.Id)
	}
	return ids
}

// chainIDs are every receipt id in h's chain, from termd itself.
func (h *otlpHost) chainIDs(t *testing.T) map[string]bool {
	t.Helper()
	out, errOut, code := h.d.Run("termctl", "receipts", "export", "--all")
	if code != 0 {
		t.Fatalf("%s: receipts export --all: %d %s", h.name, code, errOut)
	}
	ids := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.ID == "" {
			t.Fatalf("%s: export line %q: %v", h.name, l, err)
		}
		ids[r.ID] = true
	}
	return ids
}

// exportDoctor is the export line of `termd doctor -o json`.
func (h *otlpHost) exportDoctor(t *testing.T) (status, message string) {
	t.Helper()
	out, errOut, _ := h.d.Run("termd", "doctor", "--config", h.d.ConfigPath, "--state-dir", h.d.StateDir, "--socket", h.d.Socket, "-o", "json")
	var doc struct {
		Checks []struct{ Area, Status, Message string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%s: doctor -o json: %v\n%s\n%s", h.name, err, out, errOut)
	}
	for _, c := range doc.Checks {
		if c.Area == "export" {
			return c.Status, c.Message
		}
	}
	t.Fatalf("%s: doctor has no export line:\n%s", h.name, out)
	return "", ""
}

// waitUntil polls cond (the exporter works in the background) for up to 2
// minutes; what is checked is cond, never how long it took.
func waitUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached: %s", what, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Three termd hosts export their receipts to a real OpenTelemetry Collector
// (built from the collector's modules: OTLP receiver, file exporter), one
// over OTLP/gRPC from the config, one over OTLP/HTTP from the standard
// OTEL_EXPORTER_OTLP_* variables, one from the _LOGS_ variants. The
// collector is killed with SIGKILL mid-run; the hosts keep executing (one is
// stopped and restarted, one killed and restarted meanwhile); when the
// collector is back every receipt of every host is in its file, and each
// host's receipts verify offline from that file with the host's public key.
func TestOTLPExportToCollector(t *testing.T) {
	col := harness.StartCollector(t)
	start := func(name, cfg string, env ...string) *otlpHost {
		port := freeAddr(t)
		d := harness.Start(t, harness.Options{
			Config: fmt.Sprintf("metrics_listen: %s\nexport:\n  otlp:\n    host_name: %s\n    max_backoff: 1s\n%s", port, name, cfg),
			Env:    env,
		})
		return &otlpHost{name: name, d: d, metrics: port}
	}
	hosts := []*otlpHost{
		start("host-a", "    endpoint: http://"+col.GRPCAddr+"\n    protocol: grpc\n"),
		start("host-b", "", "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+col.HTTPAddr, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"),
		start("host-c", "", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=http://"+col.GRPCAddr, "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9/unused"),
	}
	want := map[string]map[string]bool{} // host -> receipt ids it made
	for _, h := range hosts {
		want[h.name] = map[string]bool{}
	}
	run := func(n int) {
		for _, h := range hosts {
			for _, id := range h.runSome(t, n) {
				want[h.name][id] = true
			}
		}
	}
	// arrived: receipt ids per host in the collector's files.
	arrived := func() (map[string]map[string]bool, []harness.LogRecord) {
		recs, err := col.Records()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]bool{}
		for _, r := range recs {
			h := r.Resource["host.name"]
			if got[h] == nil {
				got[h] = map[string]bool{}
			}
			got[h][r.Attrs["termd.receipt.id"]] = true
		}
		return got, recs
	}
	allArrived := func() (bool, string) {
		got, _ := arrived()
		var missing []string
		for h, ids := range want {
			for id := range ids {
				if !got[h][id] {
					missing = append(missing, h+":"+id)
				}
			}
		}
		return len(missing) == 0, fmt.Sprintf("%d receipt(s) missing from the collector's output: %v", len(missing), missing)
	}

	run(3)
	waitUntil(t, "receipts before the outage reach the collector", allArrived)
	for _, h := range hosts {
		if st, msg := h.exportDoctor(t); st != "OK" || !strings.Contains(msg, " 0 receipt(s) behind") {
			waitUntil(t, h.name+": doctor shows no lag", func() (bool, string) {
				st, msg := h.exportDoctor(t)
				return st == "OK" && strings.Contains(msg, " 0 receipt(s) behind"), st + " " + msg
			})
		}
	}

	// The collector dies mid-run: executions go on, receipts wait.
	col.Kill()
	outageStart := time.Now()
	run(4)
	for _, h := range hosts {
		h := h
		waitUntil(t, h.name+": the lag shows on /metrics and in doctor during the outage", func() (bool, string) {
			lag := metric(t, h.metrics, "termd_otlp_export_lag_receipts")
			st, msg := h.exportDoctor(t)
			return lag >= 4 && st == "WARN" && strings.Contains(msg, "failing since"), fmt.Sprintf("lag %v, doctor %s %s", lag, st, msg)
		})
	}
	// One host stopped and one killed while the collector is down: their
	// cursors are on disk, their receipts in their chains.
	hosts[0].d.Stop()
	hosts[0].d.Restart()
	hosts[1].d.Kill9()
	hosts[1].d.Restart()
	run(2)
	outage := time.Since(outageStart)

	col.Restart()
	caughtUp := time.Now()
	waitUntil(t, "every receipt reaches the restarted collector", allArrived)
	t.Logf("collector down %s; %d receipts per host made meanwhile; all arrived %s after it came back",
		outage.Round(time.Millisecond), 6, time.Since(caughtUp).Round(time.Millisecond))

	// Every host's whole chain is there (receipts termd itself made count
	// too), and the exporter's lag is back to 0.
	got, recs := arrived()
	for _, h := range hosts {
		for id := range h.chainIDs(t) {
			if !got[h.name][id] {
				t.Errorf("%s: receipt %s of the chain is not in the collector's output", h.name, id)
			}
		}
		h := h
		waitUntil(t, h.name+": lag 0 after catching up", func() (bool, string) {
			lag := metric(t, h.metrics, "termd_otlp_export_lag_receipts")
			return lag == 0, fmt.Sprintf("lag %v", lag)
		})
	}

	// Offline verification from the collector's output alone.
	dups := verifyCollectorOffline(t, hosts, recs, 9)
	t.Logf("%d records in the collector's output, %d of them duplicates (same receipt id)", len(recs), dups)
}

func indexOf(hs []*otlpHost, h *otlpHost) int {
	for i, x := range hs {
		if x == h {
			return i
		}
	}
	return -1
}

// verifyCollectorOffline checks the collector's records of every host from
// them alone: each host's record bodies, one per receipt id, in seq order,
// with no gap, through `termctl receipts verify` with that host's public
// key and no daemon (at least min receipts each); the records' attributes
// match their receipts; another host's key does not verify them. It
// returns how many records were duplicates (same receipt id).
func verifyCollectorOffline(t *testing.T, hosts []*otlpHost, recs []harness.LogRecord, min int) int {
	t.Helper()
	dir := t.TempDir()
	dups := 0
	for _, h := range hosts {
		bySeq := map[int64]string{}
		seen := map[string]bool{}
		for _, r := range recs {
			if r.Resource["host.name"] != h.name {
				continue
			}
			id := r.Attrs["termd.receipt.id"]
			if seen[id] {
				dups++
				continue
			}
			seen[id] = true
			var body struct {
				ID        string `json:"id"`
				Seq       int64  `json:"seq"`
				Status    string `json:"status"`
				SessionID string `json:"session_id"`
				Requester struct {
					ID string `json:"id"`
				} `json:"requester"`
				KeyID string `json:"key_id"`
			}
			if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
				t.Fatalf("%s: record body is not a receipt: %v\n%s", h.name, err, r.Body)
			}
			a := r.Attrs
			if body.ID != id || a["termd.receipt.seq"] != strconv.FormatInt(body.Seq, 10) || a["termd.status"] != body.Status ||
				a["termd.session.id"] != body.SessionID || a["termd.principal"] != body.Requester.ID || a["termd.key_id"] != body.KeyID || a["host.name"] != h.name {
				t.Errorf("%s: record attributes %v do not match its receipt %+v", h.name, a, body)
			}
			bySeq[body.Seq] = r.Body
		}
		seqs := make([]int64, 0, len(bySeq))
		for s := range bySeq {
			seqs = append(seqs, s)
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		var jsonl strings.Builder
		for i, s := range seqs {
			if i > 0 && s != seqs[i-1]+1 {
				t.Errorf("%s: seq %d..%d missing from the collector's output", h.name, seqs[i-1]+1, s-1)
			}
			jsonl.WriteString(bySeq[s] + "\n")
		}
		file := filepath.Join(dir, h.name+".jsonl")
		keyFile := filepath.Join(dir, h.name+".pub")
		writeFile(t, file, jsonl.String())
		pub, errOut, code := h.d.Run("termctl", "receipts", "public-key")
		if code != 0 {
			t.Fatalf("%s: public-key: %d %s", h.name, code, errOut)
		}
		writeFile(t, keyFile, pub)
		cmd := exec.Command(harness.Bin(t, "termctl"), "receipts", "verify", file, "--public-key", keyFile, "--socket", "/nonexistent/termd.sock")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: offline verification of the collector's records: %v\n%s", h.name, err, out)
		}
		if len(seqs) < min || !strings.Contains(string(out), fmt.Sprintf(": %d valid receipts (seq %d to %d), chain links checked", len(seqs), seqs[0], seqs[len(seqs)-1])) {
			t.Errorf("%s: want all %d receipts valid:\n%s", h.name, len(seqs), out)
		}
		// Another host's key does not verify them.
		other := filepath.Join(dir, hosts[(indexOf(hosts, h)+1)%len(hosts)].name+".pub")
		if _, err := os.Stat(other); err == nil {
			if b, err := exec.Command(harness.Bin(t, "termctl"), "receipts", "verify", file, "--public-key", other, "--socket", "/nonexistent/termd.sock").CombinedOutput(); err == nil {
				t.Errorf("%s's receipts verified with another host's key:\n%s", h.name, b)
			}
		}
	}
	return dups
}
