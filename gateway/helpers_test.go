package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/gateway"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// env is a real termd with the gateway's handler in front of it on a real
// loopback HTTP server, over a real gRPC connection to the daemon's socket.
type env struct {
	t        *testing.T
	d        *harness.Daemon
	srv      *httptest.Server
	gw       *gateway.Gateway
	URL      string
	Operator string
	Viewer   string
	// hosts are the daemons by host name when the env is a fleet.
	hosts map[string]*harness.Daemon
	fleet []gateway.Host
	tune  func(*gateway.Options)
}

type envOpts struct {
	daemon harness.Options
	tune   func(*gateway.Options)
	// fleet names several daemons (each started with daemon): the gateway
	// serves them as hosts of those names, the first the default.
	fleet []string
}

func newEnv(t *testing.T, eo ...envOpts) *env {
	t.Helper()
	var o envOpts
	if len(eo) > 0 {
		o = eo[0]
	}
	if o.daemon.Policy == "" {
		o.daemon.AskWrites = true // touch is the tests' command that needs approval
	}
	e := &env{t: t, Operator: gateway.NewTokenValue(), Viewer: gateway.NewTokenValue(), hosts: map[string]*harness.Daemon{}}
	var hosts []gateway.Host
	for _, name := range o.fleet {
		e.hosts[name] = harness.Start(t, o.daemon)
		hosts = append(hosts, gateway.Host{Name: name, Target: e.hosts[name].Socket})
	}
	var d *harness.Daemon
	if len(o.fleet) == 0 {
		d = harness.Start(t, o.daemon)
	} else {
		d = e.hosts[o.fleet[0]]
	}
	e.d, e.fleet, e.tune = d, hosts, o.tune
	e.serve()
	return e
}

// newGatewayFor is a second gateway in front of e's daemons, with the same
// tokens: what it serves it must serve without anything the first holds.
func newGatewayFor(t *testing.T, e *env) *env {
	t.Helper()
	e2 := *e
	e2.t = t
	e2.serve()
	return &e2
}

// serve starts the gateway of e (its daemons already run) on a new
// loopback HTTP server.
func (e *env) serve() {
	t := e.t
	d := e.d
	e.srv = httptest.NewUnstartedServer(nil)
	opts := gateway.Options{
		Socket: d.Socket,
		Hosts:  e.fleet,
		Listen: e.srv.Listener.Addr().String(),
		Tokens: []gateway.Token{
			{Name: "alice", Role: termdv1.Role_ROLE_OPERATOR, Value: e.Operator},
			{Name: "watcher", Role: termdv1.Role_ROLE_VIEWER, Value: e.Viewer},
		},
		RatePerSecond: 1000,
		RateBurst:     1000,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if e.tune != nil {
		e.tune(&opts)
	}
	gw, err := gateway.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	e.srv.Config.Handler = gw
	e.srv.Start()
	e.URL = e.srv.URL
	srv := e.srv
	t.Cleanup(func() { srv.Close(); gw.Close() })
}

// do sends one request; token "" sends none.
func (e *env) do(method, path, token string, body any, hdr ...string) *http.Response {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = strings.NewReader(string(j))
	}
	req, err := http.NewRequest(method, e.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// call sends a request as the operator and decodes a 200 JSON answer.
func (e *env) call(method, path string, body any) map[string]any {
	e.t.Helper()
	return e.callAs(e.Operator, method, path, body)
}

func (e *env) callAs(token, method, path string, body any) map[string]any {
	e.t.Helper()
	res := e.do(method, path, token, body)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		e.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
	}
	return m
}

func status(t *testing.T, res *http.Response) (int, string) {
	t.Helper()
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// dig walks a decoded JSON object by keys.
func dig(m any, keys ...string) any {
	for _, k := range keys {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	return m
}

func str(m any, keys ...string) string {
	s, _ := dig(m, keys...).(string)
	return s
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	ID, Event, Data string
	Comment         string
}

// sseReader parses an event stream line by line.
type sseReader struct {
	res *http.Response
	br  *bufio.Reader
}

func (e *env) openSSE(path, token string, hdr ...string) *sseReader {
	e.t.Helper()
	res := e.do("GET", path, token, nil, hdr...)
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		e.t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	return &sseReader{res: res, br: bufio.NewReader(res.Body)}
}

// next returns the next event or comment block; it fails the test after a
// generous deadline so a broken stream cannot hang the suite.
func (s *sseReader) next(t *testing.T) sseEvent {
	t.Helper()
	type result struct {
		ev  sseEvent
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var ev sseEvent
		for {
			line, err := s.br.ReadString('\n')
			if err != nil {
				ch <- result{ev, err}
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					ch <- result{ev, nil}
					return
				}
			case strings.HasPrefix(line, ":"):
				ev.Comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				if ev.Data != "" {
					ev.Data += "\n"
				}
				ev.Data += line[6:]
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("event stream ended: %v", r.err)
		}
		return r.ev
	case <-time.After(60 * time.Second):
		t.Fatal("no event within 60s")
	}
	return sseEvent{}
}

// nextEvent skips comments (heartbeats, the open notice).
func (s *sseReader) nextEvent(t *testing.T) sseEvent {
	t.Helper()
	for {
		ev := s.next(t)
		if ev.Event != "" || ev.Data != "" {
			return ev
		}
	}
}
