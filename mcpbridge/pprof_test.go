package mcpbridge

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The profiling endpoint serves what `go tool pprof URL` reads: a CPU
// profile (gzip-compressed protobuf) for ?seconds=N, named profiles in
// either form, and says in words what was wrong with a bad request.
func TestPprofEndpoint(t *testing.T) {
	srv := httptest.NewServer(pprofMux())
	defer srv.Close()
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	gzipped := []byte{0x1f, 0x8b}
	if code, body := get("/debug/pprof/profile?seconds=1"); code != 200 || !bytes.HasPrefix(body, gzipped) {
		t.Errorf("CPU profile: %d, %d bytes starting %q; want 200 and a gzip-compressed profile", code, len(body), body[:min(len(body), 8)])
	}
	if code, body := get("/debug/pprof/heap"); code != 200 || !bytes.HasPrefix(body, gzipped) {
		t.Errorf("heap profile: %d, %d bytes; want 200 and a gzip-compressed profile", code, len(body))
	}
	if code, body := get("/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(string(body), "goroutine profile: total") {
		t.Errorf("goroutine profile as text: %d %.200s", code, body)
	}
	if code, body := get("/debug/pprof/nonesuch"); code != 404 || !strings.Contains(string(body), "heap") {
		t.Errorf("unknown profile: %d %.200s; want 404 listing the profiles there are", code, body)
	}
	if code, body := get("/debug/pprof/profile?seconds=soon"); code != 400 || !strings.Contains(string(body), "seconds") {
		t.Errorf("bad seconds: %d %.200s; want 400 naming seconds", code, body)
	}
}
