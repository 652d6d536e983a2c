package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// serveEvents streams daemon events as Server-Sent Events.
//
//	GET /v1/events?session_id=S   one session; id: is the session seq
//	GET /v1/events                everything the token may see; id: is global_seq
//
// A new stream starts at "now"; ?history=1 starts with the oldest events the
// daemon still holds. Resume with the Last-Event-ID header (sent by
// EventSource on reconnect) or the since query parameter. Headers go out at once; a comment line every
// heartbeat keeps proxies and the browser from timing out; when the client
// goes away the request context ends, which cancels the daemon stream.
func (g *Gateway) serveEvents(w http.ResponseWriter, r *http.Request, s *hostConn) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	q := r.URL.Query()
	sessionID := q.Get("session_id")
	var since uint64
	for _, v := range []string{r.Header.Get("Last-Event-ID"), q.Get("since")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Last-Event-ID / since must be an event sequence number")
			return
		}
		since = n
		break
	}
	history, ok := boolParam(w, q, "history", "history must be 1 or true (start with the events termd still holds) or 0 or false (start at now)")
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream has no overall write deadline

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream, err := s.client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{SessionId: sessionID, SinceSeq: since, History: history})
	if err != nil {
		writeError(w, httpStatus(err), err.Error())
		return
	}
	// The daemon sends its headers once the subscription's starting point is
	// fixed: "stream open" then means every later event will be delivered.
	// A refusal (an unknown session, a cap) ends the stream without
	// headers: it is answered as an HTTP error (404, 429, ...), not as a
	// 200 stream that carries only an error.
	var first *termdv1.Event
	if md, err := stream.Header(); err != nil || md == nil {
		m, rerr := stream.Recv()
		if rerr != nil {
			writeError(w, httpStatus(rerr), rerr.Error())
			return
		}
		first = m.GetEvent()
	}

	next := func() (string, error) {
		var ev *termdv1.Event
		if first != nil {
			ev, first = first, nil
		} else {
			m, err := stream.Recv()
			if err != nil {
				return "", err
			}
			ev = m.GetEvent()
		}
		if ev == nil {
			return "", nil
		}
		id := ev.GetSeq()
		if sessionID == "" {
			id = ev.GetGlobalSeq()
		}
		b, err := jsonpb.Marshal(ev)
		if err != nil {
			return "", nil
		}
		return sseRaw(ev.GetKind().String(), strconv.FormatUint(id, 10), string(b)), nil
	}
	g.pumpSSE(ctx, w, rc, next)
}

// pumpSSE answers with the event-stream headers at once, then writes each
// chunk next returns ("" writes nothing), a heartbeat comment every
// heartbeat, and the end: "event: end" when next reports io.EOF, a
// stream-error event for any other error. next runs on its own goroutine,
// counted in g.streams until it has returned an error (only then is the
// daemon stream finished: cancelled when the client went away, as ctx is).
func (g *Gateway) pumpSSE(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, next func() (string, error)) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// retry: how long EventSource waits before reconnecting on its own.
	if _, err := io.WriteString(w, "retry: 2000\n: stream open\n\n"); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}

	type recv struct {
		chunk string
		err   error
	}
	chunks := make(chan recv)
	g.streams.Add(1)
	go func() {
		defer g.streams.Add(-1)
		for {
			c, err := next()
			select {
			case chunks <- recv{c, err}:
			case <-ctx.Done():
				// Keep receiving: the cancelled stream returns an error promptly.
			}
			if err != nil {
				return
			}
		}
	}()

	tick := time.NewTicker(g.opts.Heartbeat)
	defer tick.Stop()
	for {
		var chunk string
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			chunk = ": heartbeat\n\n"
		case rv := <-chunks:
			if rv.err != nil {
				if rv.err == io.EOF {
					_, _ = io.WriteString(w, "event: end\ndata: {}\n\n")
				} else if ctx.Err() == nil {
					st, _ := status.FromError(rv.err)
					chunk = sseData("stream-error", "", errorBody(httpStatus(rv.err), st.Code(), rv.err.Error()))
					_, _ = io.WriteString(w, chunk)
				}
				_ = rc.Flush()
				return
			}
			if rv.chunk == "" {
				continue
			}
			chunk = rv.chunk
		}
		if _, err := io.WriteString(w, chunk); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func sseData(event, id string, v map[string]any) string {
	b, _ := jsonMarshal(v)
	return sseRaw(event, id, string(b))
}

// sseRaw formats one event; every line of data gets its own data: prefix.
func sseRaw(event, id, data string) string {
	var sb strings.Builder
	if id != "" {
		fmt.Fprintf(&sb, "id: %s\n", id)
	}
	if event != "" {
		fmt.Fprintf(&sb, "event: %s\n", event)
	}
	for _, line := range strings.Split(data, "\n") {
		sb.WriteString("data: ")
		sb.WriteString(strings.TrimSuffix(line, "\r"))
		sb.WriteString("\n")
	}
	sb.WriteString("\n")
	return sb.String()
}

// httpStatus maps a daemon error to the HTTP status grpc-gateway would use.
func httpStatus(err error) int {
	st, _ := status.FromError(err)
	code := client.Code(err)
	if st != nil && code == 0 {
		code = st.Code()
	}
	return runtimeHTTPStatus(code)
}
