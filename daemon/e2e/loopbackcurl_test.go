package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// Issue 32 for the agent day (issue 31): an agent iterating on a dev server
// curls it without an approval each time. Against a real termd (root,
// sandbox required, the default policy, confirm mode): python3 -m
// http.server started in one execution answers `termctl run -- curl
// http://127.0.0.1:PORT/` in the next, with no approval and on the
// workspace loopback; a URL outside still asks, and so does curl with
// network host.
func TestLoopbackCurlWithoutApproval(t *testing.T) {
	requireSandbox(t)
	d := harness.Start(t, harness.Options{Policy: testPolicy(), Config: "sandbox: required\n"})
	const page = "hello from python's dev server\n"
	if err := os.WriteFile(filepath.Join(d.Workspace, "index.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	const port = 18461
	startDevServer(t, d, []string{"python3", "-u", "-m", "http.server", fmt.Sprint(port), "--bind", "127.0.0.1"}, "Serving HTTP on 127.0.0.1")

	// termctl run without a terminal and without --yes stops with 125 on a
	// plan that asks: exit 0 and the page mean it ran without approval.
	for _, url := range []string{fmt.Sprintf("http://127.0.0.1:%d/", port), fmt.Sprintf("localhost:%d/index.html", port)} {
		out, errOut, code := d.Run("termctl", "run", "--", "curl", "-sS", url)
		if code != 0 || out != page {
			t.Fatalf("termctl run -- curl -sS %s: exit %d\n%s%s", url, code, out, errOut)
		}
	}
	// The plan and its receipt say where it ran.
	out, errOut, code := d.Run("termctl", "run", "-o", "json", "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", fmt.Sprintf("http://127.0.0.1:%d/", port))
	var res struct {
		Verdict   string `json:"verdict"`
		Stdout    string `json:"stdout"`
		ReceiptID string `json:"receipt_id"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Stdout != "200" || res.ReceiptID == "" {
		t.Fatalf("termctl run -o json -- curl -w %%{http_code}: exit %d %v\n%s%s", code, err, out, errOut)
	}
	sb, _ := receiptJSON(t, d.Client, res.ReceiptID)["sandbox"].(map[string]any)
	if sb["network_mode"] != "workspace-loopback" || sb["network_namespace"] != true || sb["profile"] != "read-only" {
		t.Errorf("receipt sandbox of a loopback curl: %v", sb)
	}

	// Anything that reaches out still asks: an outside URL, one beside a
	// loopback URL, a proxy, and network host asked for.
	for _, args := range [][]string{
		{"curl", "-sS", "http://example.test/"},
		{"curl", "-sS", fmt.Sprintf("http://127.0.0.1:%d/", port), "http://example.test/"},
		{"curl", "-sS", "-x", "http://127.0.0.1:3128", fmt.Sprintf("http://127.0.0.1:%d/", port)},
		{"--network", "host", "--", "curl", "-sS", fmt.Sprintf("http://127.0.0.1:%d/", port)},
	} {
		argv := append([]string{"run"}, args...)
		if args[0] == "curl" {
			argv = append([]string{"run", "--"}, args...)
		}
		out, errOut, code := d.Run("termctl", argv...)
		if code != 125 || !strings.Contains(errOut, "needs approval") || !strings.Contains(errOut, "uses the network") || out != "" {
			t.Errorf("termctl %s: exit %d, want 125 asking for the network\n%s%s", strings.Join(argv, " "), code, out, errOut)
		}
	}
}
