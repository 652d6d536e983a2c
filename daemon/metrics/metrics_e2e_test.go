package metrics_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func value(t *testing.T, body, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("metrics lack %s", series)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestMetricsAndLogsAfterARun runs a command that prints a secret-looking
// token, reloads the policy, then scrapes /metrics and reads the JSON log:
// every listed series is there with the right counts, and the log holds
// neither the token nor the command's output.
func TestMetricsAndLogsAfterARun(t *testing.T) {
	addr := freePort(t)
	d := harness.Start(t, harness.Options{
		Config: fmt.Sprintf("metrics_listen: %q\nlog_level: debug\n", addr),
		Args:   []string{"--log-format", "json"},
	})
	token := "ghp_" + strings.Repeat("Zq7", 12)
	if err := os.WriteFile(filepath.Join(d.Workspace, "token.txt"), []byte("token="+token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := d.Client.Plans.CreatePlan(t.Context(), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"cat", "token.txt"}}})
	if err != nil || p.Plan.State != termdv1.PlanState_PLAN_STATE_PLANNED {
		t.Fatalf("plan: %v %v", p, err)
	}
	st, err := d.Client.Executions.ExecuteAndWait(t.Context(), &termdv1.ExecuteAndWaitRequest{PlanId: p.Plan.Id})
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for {
		m, err := st.Recv()
		if err != nil {
			break
		}
		if o := m.Event.GetOutput(); o != nil {
			out += string(o.Data)
		}
		if m.Event.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
			break
		}
	}
	if !strings.Contains(out, "token=") {
		t.Fatalf("command output: %q", out)
	}
	// A plan the policy denies, and a policy reload.
	if _, err := d.Client.Plans.CreatePlan(t.Context(), &termdv1.CreatePlanRequest{Request: &termdv1.CommandRequest{Argv: []string{"rm", "-rf", "/"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Policy.ReloadPolicy(t.Context(), &termdv1.ReloadPolicyRequest{}); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	if v := value(t, body, `termd_plans_total{decision="allow"}`); v < 1 {
		t.Errorf("allowed plans %v", v)
	}
	if v := value(t, body, `termd_plans_total{decision="deny"}`); v < 1 {
		t.Errorf("denied plans %v", v)
	}
	if v := value(t, body, `termd_executions_total{status="succeeded"}`); v != 1 {
		t.Errorf("succeeded executions %v, want 1", v)
	}
	if v := value(t, body, `termd_execution_duration_seconds_count{status="succeeded"}`); v != 1 {
		t.Errorf("duration observations %v, want 1", v)
	}
	if v := value(t, body, `termd_output_bytes_total`); v != float64(len("token="+token+"\n")) {
		t.Errorf("output bytes %v, want %d", v, len("token="+token+"\n"))
	}
	if v := value(t, body, `termd_policy_reloads_total{result="ok"}`); v != 1 {
		t.Errorf("policy reloads %v, want 1", v)
	}
	if v := value(t, body, `termd_active_sessions`); v < 1 {
		t.Errorf("active sessions %v", v)
	}
	value(t, body, `termd_active_executions`)
	value(t, body, `termd_event_subscribers`)
	if v := value(t, body, `termd_receipts`); v < 2 {
		t.Errorf("receipts %v, want the run's and the denial's", v)
	}
	if strings.Contains(body, token) || strings.Contains(body, "token.txt") {
		t.Error("metrics expose a command or its output")
	}

	d.Stop()
	log := d.Log()
	if strings.Contains(log, token) || strings.Contains(log, "token=") {
		t.Errorf("the log contains command output / the secret:\n%s", log)
	}
	sc := bufio.NewScanner(strings.NewReader(log))
	n := 0
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Errorf("log line is not JSON (--log-format json): %q", sc.Text())
			continue
		}
		if m["msg"] == nil || m["level"] == nil {
			t.Errorf("log line lacks msg/level: %q", sc.Text())
		}
		n++
	}
	if n < 2 {
		t.Errorf("only %d log lines", n)
	}
}
