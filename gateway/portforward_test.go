package gateway_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// POST /v1/port-forwards holds a forward for as long as the HTTP request
// lasts: its first line is the forward; ending the request closes the port.
func TestPortForwardRoute(t *testing.T) {
	e := newEnv(t)
	code, raw := status(t, e.do("POST", "/v1/plans", e.Operator, map[string]any{"request": map[string]any{
		"argv": []string{"python3", "-m", "http.server", "--bind", "127.0.0.1", "18461"}, "timeout_seconds": 300}}))
	var pr struct {
		Plan struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(raw), &pr); err != nil || code != 200 || pr.Plan.State != "PLAN_STATE_PLANNED" {
		t.Fatalf("POST /v1/plans: %d %s", code, raw)
	}
	code, raw = status(t, e.do("POST", "/v1/plans/"+pr.Plan.ID+":execute", e.Operator, map[string]any{}))
	var er struct {
		Execution struct {
			ID string `json:"id"`
		} `json:"execution"`
	}
	if err := json.Unmarshal([]byte(raw), &er); err != nil || code != 200 {
		t.Fatalf("execute: %d %s", code, raw)
	}
	defer func() {
		e.do("POST", "/v1/executions/"+er.Execution.ID+":cancel", e.Operator, map[string]any{}).Body.Close()
	}()

	deadline := time.Now().Add(60 * time.Second)
	for {
		res := e.do("POST", "/v1/port-forwards", e.Operator, map[string]any{"execution_id": er.Execution.ID, "remote_port": 18461})
		if res.StatusCode != 200 {
			c, raw := status(t, res)
			t.Fatalf("POST /v1/port-forwards: %d %s", c, raw)
		}
		line, err := bufio.NewReader(res.Body).ReadString('\n')
		var first struct {
			Result struct {
				Forward struct {
					ID           string `json:"id"`
					LocalAddress string `json:"local_address"`
				} `json:"forward"`
			} `json:"result"`
		}
		if err != nil || json.Unmarshal([]byte(line), &first) != nil || !strings.HasPrefix(first.Result.Forward.LocalAddress, "127.0.0.1:") {
			res.Body.Close()
			t.Fatalf("the forward's first message: %q %v", line, err)
		}
		addr := first.Result.Forward.LocalAddress
		got, gerr := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/")
		if gerr == nil {
			body, _ := io.ReadAll(got.Body)
			got.Body.Close()
			if !strings.Contains(string(body), "Directory listing") {
				t.Fatalf("GET through the forward: %d %.200s", got.StatusCode, body)
			}
			res.Body.Close() // ends the request: the port closes
			for {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					return
				}
				c.Close()
				if time.Now().After(deadline) {
					t.Fatalf("%s still open after its request ended", addr)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		res.Body.Close() // the server may not listen yet
		if time.Now().After(deadline) {
			_, ex := status(t, e.do("GET", "/v1/executions/"+er.Execution.ID, e.Operator, nil))
			_, out := status(t, e.do("GET", "/v1/executions/"+er.Execution.ID+"/output?stream=OUTPUT_STREAM_STDERR", e.Operator, nil))
			t.Fatalf("GET through the forward never answered: %v\nexecution: %s\nstderr: %s", gerr, ex, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
