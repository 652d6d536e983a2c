package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The merged event stream of the fleet:
//
//	GET /v1/fleet/events[?host=a,b][&history=1]
//
// Every host's all-sessions stream, each event's JSON with a "host" field
// added. An event's id: is the position of the whole stream, one entry per
// host: "a=EPOCH.SEQ,b=EPOCH.SEQ" (sorted by name), where SEQ is the last
// global_seq delivered from that host and EPOCH names the daemon's run (its
// started_at, in base-36 microseconds: event sequence numbers restart with
// termd). A browser reconnecting with Last-Event-ID (or ?since=) resumes
// every host from its own position; a host whose EPOCH changed restarted
// and is followed from the first event of its new run. "event: host"
// (data: the host as /v1/hosts shows it, plus "restarted") says a host went
// up or down; it carries the stream's id too, so a stream that has had no
// daemon event yet still leaves a position to resume from. The gateway
// keeps nothing of a stream once it ends: the position lives in the id.

// hostCursor is one host's position in a merged stream.
type hostCursor struct {
	Epoch string
	Seq   uint64
}

// fleetCursor is a merged stream's position: host name -> cursor.
type fleetCursor map[string]hostCursor

func (c fleetCursor) String() string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	slices.Sort(names)
	var sb strings.Builder
	for i, n := range names {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%s=%s.%d", n, c[n].Epoch, c[n].Seq)
	}
	return sb.String()
}

// parseFleetCursor reads "a=EPOCH.SEQ,b=EPOCH.SEQ". Hosts this gateway does
// not serve are kept (and written back), so a position made by another
// gateway of the same fleet survives.
func parseFleetCursor(s string) (fleetCursor, error) {
	c := fleetCursor{}
	s = strings.TrimSpace(s)
	if s == "" {
		return c, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, pos, ok := strings.Cut(part, "=")
		epoch, seq, ok2 := strings.Cut(pos, ".")
		n, err := strconv.ParseUint(seq, 10, 64)
		if !ok || !ok2 || err != nil || CheckHostName(name) != nil || epoch == "" || strings.Trim(epoch, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
			return nil, fmt.Errorf("Last-Event-ID / since %q: want HOST=EPOCH.SEQ pairs separated by commas, as the ids of /v1/fleet/events", s)
		}
		if _, dup := c[name]; dup {
			return nil, fmt.Errorf("Last-Event-ID / since %q names host %q twice", s, name)
		}
		c[name] = hostCursor{Epoch: epoch, Seq: n}
	}
	return c, nil
}

// epochOf names a daemon run by its start time.
func epochOf(st *termdv1.GetStatusResponse) string {
	return strconv.FormatInt(st.GetStartedAt().AsTime().UnixMicro(), 36)
}

// fleetMsg is what a host's follower hands the stream writer: a daemon
// event, or a change of the host's state; either may move its cursor.
type fleetMsg struct {
	host      *host
	cursor    *hostCursor
	ev        *termdv1.Event
	state     *hostState
	restarted bool
}

// Reconnection backoff of a host's follower.
const (
	followBackoffMin = 250 * time.Millisecond
	followBackoffMax = 5 * time.Second
)

func (g *Gateway) serveFleetEvents(w http.ResponseWriter, r *http.Request, s *scope) {
	hs, ok := g.selectedHosts(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	pos := r.Header.Get("Last-Event-ID")
	if pos == "" {
		pos = q.Get("since")
	}
	cur, err := parseFleetCursor(pos)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	history, ok := boolParam(w, q, "history", "history must be 1 or true (hosts without a position start with the events termd still holds) or 0 or false (they start at now)")
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	in := make(chan fleetMsg)
	for _, h := range hs {
		start, has := cur[h.Name]
		g.streams.Add(1)
		go func() {
			defer g.streams.Add(-1)
			g.followHost(ctx, h, s.conns[h.Name].client, start, has, history, in)
		}()
	}
	next := func() (string, error) {
		var m fleetMsg
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case m = <-in:
		}
		if m.cursor != nil {
			cur[m.host.Name] = *m.cursor
		}
		id := cur.String()
		if m.ev != nil {
			b, err := withHost(m.ev, m.host.Name)
			if err != nil {
				return "", nil
			}
			return sseRaw(m.ev.GetKind().String(), id, string(b)), nil
		}
		hm := hostJSON(m.host, *m.state, m.host == g.def)
		hm["restarted"] = m.restarted
		b, _ := json.Marshal(hm)
		return sseRaw("host", id, string(b)), nil
	}
	g.pumpSSE(ctx, w, rc, next)
}

// followHost follows one host's all-sessions events from start (has: the
// client gave a position for it) until ctx ends, reconnecting with backoff
// when the host drops and resuming from the last event delivered.
func (g *Gateway) followHost(ctx context.Context, h *host, c *client.Client, start hostCursor, has, history bool, out chan<- fleetMsg) {
	send := func(m fleetMsg) bool {
		select {
		case out <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	cur := start
	backoff := followBackoffMin
	announced, wasUp := false, false
	for ctx.Err() == nil {
		opened, err := g.followOnce(ctx, h, c, &cur, &has, history, send)
		if ctx.Err() != nil {
			return
		}
		if opened {
			backoff, wasUp = followBackoffMin, true
		}
		st := h.observe(nil, err)
		if wasUp || !announced {
			if !send(fleetMsg{host: h, state: &st}) {
				return
			}
			announced, wasUp = true, false
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, followBackoffMax)
	}
}

// followOnce opens one daemon stream at the host's position and relays it
// until it breaks. opened says the stream was established (the host was up).
func (g *Gateway) followOnce(ctx context.Context, h *host, c *client.Client, cur *hostCursor, has *bool, history bool, send func(fleetMsg) bool) (opened bool, err error) {
	status := func() (*termdv1.GetStatusResponse, error) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return c.Daemon.GetStatus(sctx, &termdv1.GetStatusRequest{})
	}
	for {
		st, err := status()
		if err != nil {
			return false, err
		}
		epoch := epochOf(st)
		var since uint64
		restarted := false
		switch {
		case *has && cur.Epoch == epoch:
			since = cur.Seq
		case *has:
			restarted = true // a new run: follow it from its first event
		case history:
		default:
			since = st.GetLastGlobalSeq()
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// since 0 with history: from the oldest event held, which in a run
		// that has published nothing yet is its first.
		stream, err := c.Events.StreamEvents(sctx, &termdv1.StreamEventsRequest{SinceSeq: since, History: since == 0})
		if err != nil {
			return false, err
		}
		var first *termdv1.Event
		if md, err := stream.Header(); err != nil || md == nil {
			m, err := stream.Recv()
			if err != nil {
				return false, err
			}
			first = m.GetEvent()
		}
		// The stream must be on the run the position was taken from: a
		// restart between the two would resume a new run at an old seq.
		st2, err := status()
		if err != nil {
			return false, err
		}
		if epochOf(st2) != epoch {
			cancel()
			continue
		}
		*cur, *has = hostCursor{Epoch: epoch, Seq: since}, true
		state := h.observe(st2, nil)
		if !send(fleetMsg{host: h, cursor: &hostCursor{Epoch: epoch, Seq: since}, state: &state, restarted: restarted}) {
			return true, ctx.Err()
		}
		for {
			ev := first
			first = nil
			if ev == nil {
				m, err := stream.Recv()
				if err != nil {
					return true, err
				}
				ev = m.GetEvent()
			}
			if ev == nil {
				continue
			}
			cur.Seq = ev.GetGlobalSeq()
			if !send(fleetMsg{host: h, cursor: &hostCursor{Epoch: epoch, Seq: cur.Seq}, ev: ev}) {
				return true, ctx.Err()
			}
		}
	}
}

// withHost is m's JSON (the API's convention) with "host" added first.
func withHost(m proto.Message, hostName string) (json.RawMessage, error) {
	b, err := jsonpb.Marshal(m)
	if err != nil {
		return nil, err
	}
	hb, _ := json.Marshal(hostName)
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("encoding %T: not an object", m)
	}
	out := append([]byte(`{"host":`), hb...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}
