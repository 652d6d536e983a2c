package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// screenEvery bounds how often a terminal stream sends a fresh screen while
// output arrives: a program that floods its terminal costs a watcher at most
// this many GetScreen calls per second.
const screenEvery = 100 * time.Millisecond

// terminalStreamID returns EXEC for /v1/executions/EXEC/terminal/stream.
func terminalStreamID(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/executions/")
	if !ok {
		return ""
	}
	id, ok := strings.CutSuffix(rest, "/terminal/stream")
	if !ok || id == "" || strings.Contains(id, "/") {
		return ""
	}
	return id
}

// serveTerminal attaches to a PTY execution's terminal as Server-Sent Events.
//
//	GET /v1/executions/ID/terminal/stream[?since_offset=N]
//
// event: screen   the rendered screen (Screen JSON): first the current one,
//
//	then a fresh one after output (at most one per screenEvery)
//
// event: output   raw output (OutputChunk JSON, data base64)
// event: EVENT_KIND_...   the terminal's and the execution's events
// event: end      after the execution's receipt
//
// id: is the output offset reached, so a reconnecting EventSource
// (Last-Event-ID) resumes the raw output where it left off. Attaching only
// watches: typing needs POST /v1/executions/ID:send by whoever holds the
// input (POST /v1/executions/ID:take-input to take it).
func (g *Gateway) serveTerminal(w http.ResponseWriter, r *http.Request, s *hostConn, execID string) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	since := int64(-1)
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("since_offset")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < -1 {
			writeError(w, http.StatusBadRequest, "Last-Event-ID / since_offset must be an output offset (0 or more; -1: from now)")
			return
		}
		since = n
		break
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream, err := s.client.Terminals.AttachTerminal(ctx, &termdv1.AttachTerminalRequest{ExecutionId: execID, SinceOffset: since})
	if err != nil {
		writeError(w, httpStatus(err), err.Error())
		return
	}
	// The first message is the current screen; a refusal (unknown
	// execution, not a terminal) comes instead, and is answered as an HTTP
	// error rather than a 200 stream carrying only an error.
	first, err := stream.Recv()
	if err != nil {
		writeError(w, httpStatus(err), err.Error())
		return
	}

	type recvd struct {
		m   *termdv1.AttachTerminalResponse
		err error
	}
	msgs := make(chan recvd)
	go func() {
		for {
			m, err := stream.Recv()
			select {
			case msgs <- recvd{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var (
		pending  = first
		refresh  <-chan time.Time
		lastShot time.Time
	)
	chunkOf := func(m *termdv1.AttachTerminalResponse) string {
		switch p := m.GetPayload().(type) {
		case *termdv1.AttachTerminalResponse_Screen:
			lastShot = time.Now()
			return screenChunk(p.Screen)
		case *termdv1.AttachTerminalResponse_Output:
			o := p.Output
			if refresh == nil {
				refresh = time.After(max(time.Until(lastShot.Add(screenEvery)), 0))
			}
			b, err := jsonpb.Marshal(o)
			if err != nil {
				return ""
			}
			return sseRaw("output", strconv.FormatInt(o.GetOffset()+int64(len(o.GetData())), 10), string(b))
		case *termdv1.AttachTerminalResponse_Event:
			b, err := jsonpb.Marshal(p.Event)
			if err != nil {
				return ""
			}
			return sseRaw(p.Event.GetKind().String(), "", string(b))
		}
		return ""
	}
	next := func() (string, error) {
		if pending != nil {
			m := pending
			pending = nil
			return chunkOf(m), nil
		}
		select {
		case rv := <-msgs:
			if rv.err != nil {
				return "", rv.err
			}
			return chunkOf(rv.m), nil
		case <-refresh:
			refresh = nil
			sc, err := s.client.Terminals.GetScreen(ctx, &termdv1.GetScreenRequest{ExecutionId: execID})
			if err != nil {
				return "", nil // the stream itself reports the end
			}
			lastShot = time.Now()
			return screenChunk(sc.GetScreen()), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	g.pumpSSE(ctx, w, rc, next)
}

// screenChunk is a screen event; its id is the output offset it reflects.
func screenChunk(sc *termdv1.Screen) string {
	b, err := jsonpb.Marshal(sc)
	if err != nil {
		return ""
	}
	return sseRaw("screen", strconv.FormatInt(sc.GetOutputOffset(), 10), string(b))
}
