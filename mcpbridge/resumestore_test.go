package mcpbridge_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/mcpbridge"
)

// The stateful sessions' resumption store is bounded at ResumeStoreBytes,
// all sessions together: four sessions that are never closed and keep
// calling leave termd-mcp's live heap within that bound (9.1 MiB with the
// SDK's default of 10 MiB, 3.0 with 4 MiB), and the latest call's stream
// still resumes from its priming event.
func TestResumeStoreIsBounded(t *testing.T) {
	d := startDaemon(t)
	hb := startHTTPBridgeBin(t, d, "", freeLoopback(t))
	send := func(method string, hdr map[string]string, body string, wait time.Duration) (*http.Response, string) {
		req, _ := http.NewRequest(method, hb.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+hb.Token)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Error(err)
			return &http.Response{}, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body) // a POST's stream ends with the response
		return resp, string(b)
	}
	sessions := make([]map[string]string, 4)
	for i := range sessions {
		res, _ := send("POST", nil, initBody, 10*time.Second)
		sessions[i] = map[string]string{"Mcp-Session-Id": res.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
		send("POST", sessions[i], `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 10*time.Second)
	}
	// 3,000 tools/list calls, 750 a session, four at a time: ~3 KB of each
	// result is stored (8.4 MiB in all without a bound of our own).
	before := liveHeap(t, hb.pprof)
	const calls = 750
	lasts := make([][]sseEvent, len(sessions))
	var wg sync.WaitGroup
	for i, h := range sessions {
		wg.Go(func() {
			for n := range calls {
				_, body := send("POST", h, `{"jsonrpc":"2.0","id":`+strconv.Itoa(n+2)+`,"method":"tools/list"}`, 10*time.Second)
				if lasts[i] = readSSEEvents(strings.NewReader(body)); len(lasts[i]) < 2 || lasts[i][0].id == "" {
					t.Errorf("tools/list %d: want a priming event and the result: %.200q", n, body)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	last, lastSession, lastID := lasts[0], sessions[0], calls+1
	live := liveHeap(t, hb.pprof)
	t.Logf("termd-mcp's live heap after %d tools/list calls on 4 open sessions: %.1f MiB (before them: %.1f MiB)", calls*len(sessions), float64(live)/(1<<20), float64(before)/(1<<20))
	if live > mcpbridge.ResumeStoreBytes+3<<20 {
		t.Errorf("live heap %.1f MiB: the resumption store holds more than ResumeStoreBytes (%d MiB)", float64(live)/(1<<20), mcpbridge.ResumeStoreBytes>>20)
	}
	// The latest call's stream resumes from its priming event: its result
	// is replayed (the GET stream stays open: read it for 3 s).
	hdr := map[string]string{"Last-Event-ID": last[0].id}
	maps.Copy(hdr, lastSession)
	resp, body := send("GET", hdr, "", 3*time.Second)
	for _, e := range readSSEEvents(strings.NewReader(body)) {
		if e.data["id"] == float64(lastID) && e.data["result"] != nil {
			return
		}
	}
	t.Errorf("resuming the latest stream (Last-Event-ID %s, status %d) did not replay its result", last[0].id, resp.StatusCode)
}

// liveHeap is termd-mcp's heap in use after a collection (its profiler at
// addr).
func liveHeap(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`# HeapAlloc = (\d+)`).FindSubmatch(text)
	if m == nil {
		t.Fatalf("no HeapAlloc in the heap profile: %.300q", text)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
