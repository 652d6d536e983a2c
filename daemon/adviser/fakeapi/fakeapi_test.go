package fakeapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, s *Server, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestQueueThenMarkerThenDefault(t *testing.T) {
	s := New(t)
	s.Enqueue(RateLimited("7"))
	body := func(q string) string {
		return `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + q + `"}]}`
	}
	resp, _ := post(t, s, "k", body("FAKE:keepalive"))
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("queued behaviour not used first: %d", resp.StatusCode)
	}
	resp, out := post(t, s, "k", body("please FAKE:keepalive"))
	if resp.StatusCode != 200 || strings.Count(out, ": keep-alive\n") != 400 || !strings.Contains(out, `"content":"kept "`) || !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("marker behaviour: %d %q", resp.StatusCode, out[len(out)-200:])
	}
	_, out = post(t, s, "k", body("FAKE:reasoning"))
	if !strings.Contains(out, `"reasoning_content":"thinking "`) {
		t.Fatalf("reasoning deltas missing: %s", out)
	}
	_, out = post(t, s, "k", body("plain"))
	if !strings.Contains(out, "a fake ") {
		t.Fatalf("default: %s", out)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || reqs[0].Behavior != "queue" || reqs[1].Behavior != "marker:keepalive" || reqs[3].Behavior != "default" {
		t.Fatalf("recorded: %+v", reqs)
	}
	if reqs[1].Messages[0].Content != "please FAKE:keepalive" || reqs[1].Header.Get("Authorization") != "Bearer k" {
		t.Fatalf("recorded request: %+v", reqs[1])
	}
}

func TestRequireKey(t *testing.T) {
	s := New(t)
	s.RequireKey = "right"
	if resp, _ := post(t, s, "wrong", `{"model":"m","stream":true,"messages":[]}`); resp.StatusCode != 401 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if resp, _ := post(t, s, "right", `{"model":"m","stream":true,"messages":[]}`); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
