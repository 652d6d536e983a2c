// Package fakeapi is a local OpenAI-compatible /chat/completions server for
// tests of termd's adviser and of everything built on it (gateway, MCP bridge,
// CLI end-to-end tests). It never needs the network.
//
// Each request gets a Behavior: the next one queued with Enqueue, else the one
// named by a marker "FAKE:<name>" in the last user message (see Markers), else
// Default. Every request is recorded (headers and raw body) so tests can check
// what was sent.
package fakeapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Behavior scripts one response.
type Behavior struct {
	// Status, when not 0 or 200, answers with an OpenAI-style error body.
	Status       int
	RetryAfter   string // Retry-After header sent with an error status
	ErrorMessage string
	ErrorType    string
	ErrorCode    string

	KeepAlives int      // ": keep-alive" comment lines sent before the first chunk
	Reasoning  []string // reasoning_content deltas, sent before Chunks
	Chunks     []string // content deltas
	Delay      time.Duration

	// Stall sends the chunks, then hangs (no [DONE]) until the client goes
	// away or the server closes.
	Stall bool
	// Drop aborts the connection after the chunks (before any when Chunks is
	// empty and there is no reasoning), as a transport failure.
	Drop bool
	// NoDone ends the stream without a finish reason and without [DONE].
	NoDone       bool
	FinishReason string // default "stop"
}

// Answer streams the given chunks.
func Answer(chunks ...string) Behavior { return Behavior{Chunks: chunks} }

// KeepAlive streams n ": keep-alive" comment lines, then the chunks.
func KeepAlive(n int, chunks ...string) Behavior { return Behavior{KeepAlives: n, Chunks: chunks} }

// Reasoning streams reasoning_content deltas, then the answer chunks.
func Reasoning(reasoning []string, chunks ...string) Behavior {
	return Behavior{Reasoning: reasoning, Chunks: chunks}
}

// RateLimited answers 429 with the given Retry-After ("" for none).
func RateLimited(retryAfter string) Behavior {
	return Behavior{Status: 429, RetryAfter: retryAfter, ErrorMessage: "Rate limit reached for requests", ErrorType: "rate_limit_error"}
}

// ServerError answers 500.
func ServerError() Behavior {
	return Behavior{Status: 500, ErrorMessage: "The server had an error while processing your request", ErrorType: "server_error"}
}

// Unauthorized answers 401.
func Unauthorized() Behavior {
	return Behavior{Status: 401, ErrorMessage: "Authentication Fails, your api key is invalid", ErrorType: "authentication_error", ErrorCode: "invalid_request_error"}
}

// ContextTooLong answers 400 with a context-length message.
func ContextTooLong() Behavior {
	return Behavior{Status: 400, ErrorMessage: "This model's maximum context length is 131072 tokens. However, you requested 200000 tokens. Please reduce the length of the messages.", ErrorType: "invalid_request_error"}
}

// Stalled streams the chunks, then hangs until the client goes away.
func Stalled(chunks ...string) Behavior { return Behavior{Chunks: chunks, Stall: true} }

// Dropped aborts the connection after the chunks (at once when none).
func Dropped(chunks ...string) Behavior { return Behavior{Chunks: chunks, Drop: true} }

// MalformedSuggestion streams suggestion JSON that is cut off.
func MalformedSuggestion() Behavior {
	return Answer(`{"suggestions": [{"argv": ["ls", "-la"], `, `"purpose": "list files"`)
}

// GoodSuggestion streams valid suggestion JSON with two read-only commands.
func GoodSuggestion() Behavior {
	return Answer(`{"suggestions": [`, `{"argv": ["ls", "-la"], "purpose": "list files"}, `,
		`{"argv": ["git", "status", "--short"], "purpose": "show changed files"}]}`)
}

// DangerousSuggestion streams valid suggestion JSON proposing destructive
// and shell commands.
func DangerousSuggestion() Behavior {
	return Answer(`{"suggestions": [`, `{"argv": ["rm", "-rf", "/"], "purpose": "free disk space"}, `,
		`{"argv": ["bash", "-c", "curl x | sh"], "purpose": "install the tool"}]}`)
}

// Verdict streams an explanation ending with a VERDICT line.
func Verdict(dangerous bool) Behavior {
	reason := "reads files only"
	if dangerous {
		reason = "deletes data recursively"
	}
	return Answer("This plan runs the command as shown. ", "It was decided by policy.\n",
		fmt.Sprintf(`VERDICT: {"dangerous": %t, "reason": %q}`, dangerous, reason))
}

// Markers are the built-in behaviours chosen by "FAKE:<name>" in the last user message.
func Markers() map[string]Behavior {
	return map[string]Behavior{
		"429":            RateLimited("1"),
		"500":            ServerError(),
		"401":            Unauthorized(),
		"context":        ContextTooLong(),
		"stall":          Stalled("partial ", "answer "),
		"drop":           Dropped(),
		"keepalive":      KeepAlive(400, "kept ", "alive"),
		"reasoning":      Reasoning([]string{"thinking ", "hard"}, "the ", "answer"),
		"badjson":        MalformedSuggestion(),
		"suggest":        GoodSuggestion(),
		"danger":         DangerousSuggestion(),
		"verdict-danger": Verdict(true),
		"verdict-safe":   Verdict(false),
	}
}

// Request is one recorded request.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
	// Messages are the decoded chat messages (role and content).
	Messages []Message
	Model    string
	Behavior string // "queue", "marker:<name>" or "default"
}

// Message is a chat message as received.
type Message struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// Server is the fake API. Use URL as the adviser's base URL.
type Server struct {
	*httptest.Server
	// RequireKey, when set, makes any other bearer token a 401.
	RequireKey string

	mu       sync.Mutex
	queue    []Behavior
	markers  map[string]Behavior
	def      Behavior
	requests []Request
	quit     chan struct{}
	once     sync.Once
}

// New starts a server; tb (may be nil) closes it at cleanup.
func New(tb testing.TB) *Server {
	s := &Server{markers: Markers(), def: Answer("This is ", "a fake ", "answer."), quit: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

// Close releases stalled handlers, then stops the server.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.quit)
		s.Server.CloseClientConnections()
		s.Server.Close()
	})
}

// Enqueue adds behaviours used, in order, by the next requests.
func (s *Server) Enqueue(b ...Behavior) {
	s.mu.Lock()
	s.queue = append(s.queue, b...)
	s.mu.Unlock()
}

// Requests returns copies of all recorded requests.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count is the number of requests received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *Server) pick(msgs []Message) (Behavior, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		b := s.queue[0]
		s.queue = s.queue[1:]
		return b, "queue"
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		// The longest matching name wins ("verdict-danger" over a shorter one).
		best := ""
		for name := range s.markers {
			if strings.Contains(msgs[i].Content, "FAKE:"+name) && len(name) > len(best) {
				best = name
			}
		}
		if best != "" {
			return s.markers[best], "marker:" + best
		}
		break
	}
	return s.def, "default"
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Model    string    `json:"model"`
		Messages []Message `json:"messages"`
		Stream   bool      `json:"stream"`
	}
	decodeErr := json.Unmarshal(body, &req)
	b, how := s.pick(req.Messages)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Messages: req.Messages, Model: req.Model, Behavior: how})
	s.mu.Unlock()

	if decodeErr != nil {
		writeError(w, Behavior{Status: 400, ErrorMessage: "invalid JSON body", ErrorType: "invalid_request_error"})
		return
	}
	if s.RequireKey != "" && r.Header.Get("Authorization") != "Bearer "+s.RequireKey {
		writeError(w, Unauthorized())
		return
	}
	if b.Status != 0 && b.Status != http.StatusOK {
		writeError(w, b)
		return
	}
	if b.Drop && len(b.Chunks) == 0 && len(b.Reasoning) == 0 {
		panic(http.ErrAbortHandler) // closes the connection without a response
	}
	if !req.Stream {
		writeError(w, Behavior{Status: 400, ErrorMessage: "fakeapi only streams; set stream: true", ErrorType: "invalid_request_error"})
		return
	}

	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	for i := 0; i < b.KeepAlives; i++ {
		io.WriteString(w, ": keep-alive\n\n")
	}
	flush()
	model := req.Model
	n := 0
	send := func(delta map[string]any, finish any) bool {
		n++
		ev := map[string]any{
			"id": "fake-chunk", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
		data, _ := json.Marshal(ev)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return false
		}
		flush()
		if b.Delay > 0 {
			select {
			case <-time.After(b.Delay):
			case <-r.Context().Done():
				return false
			case <-s.quit:
				return false
			}
		}
		return r.Context().Err() == nil
	}
	if !send(map[string]any{"role": "assistant", "content": ""}, nil) {
		return
	}
	for _, c := range b.Reasoning {
		if !send(map[string]any{"reasoning_content": c}, nil) {
			return
		}
	}
	for _, c := range b.Chunks {
		if !send(map[string]any{"content": c}, nil) {
			return
		}
	}
	switch {
	case b.Stall:
		select {
		case <-r.Context().Done():
		case <-s.quit:
		}
		return
	case b.Drop:
		panic(http.ErrAbortHandler)
	case b.NoDone:
		return
	}
	finish := b.FinishReason
	if finish == "" {
		finish = "stop"
	}
	send(map[string]any{}, finish)
	io.WriteString(w, "data: [DONE]\n\n")
	flush()
}

func writeError(w http.ResponseWriter, b Behavior) {
	if b.RetryAfter != "" {
		w.Header().Set("Retry-After", b.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(b.Status)
	e := map[string]any{"message": b.ErrorMessage, "type": b.ErrorType}
	if b.ErrorCode != "" {
		e["code"] = b.ErrorCode
	}
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}
