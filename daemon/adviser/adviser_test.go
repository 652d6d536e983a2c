package adviser

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/daemon/adviser/fakeapi"
)

const testKey = "sk-test-VERYSECRETKEY-0123456789"

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testRedactor replaces known values, and learns more through AddSecret.
type testRedactor struct {
	mu      sync.Mutex
	secrets []string
}

func (r *testRedactor) AddSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = append(r.secrets, s)
}

func (r *testRedactor) Redact(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, "[REDACTED]")
	}
	return s
}

type harness struct {
	a      *Adviser
	srv    *fakeapi.Server
	logs   *lockedBuffer
	red    *testRedactor
	mu     sync.Mutex
	sleeps []time.Duration
}

func (h *harness) delays() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.sleeps...)
}

func newHarness(t *testing.T, mut func(*Config)) *harness {
	t.Helper()
	t.Setenv("DEEPSEEK_API_KEY", testKey)
	h := &harness{srv: fakeapi.New(t), logs: &lockedBuffer{}, red: &testRedactor{}}
	cfg := Config{
		Enabled: true, BaseURL: h.srv.URL, Timeout: 20 * time.Second, IdleTimeout: 5 * time.Second,
		MaxAttempts: 4, History: 10, BackoffBase: 5 * time.Millisecond, MaxRetryAfter: 5 * time.Second,
	}
	if mut != nil {
		mut(&cfg)
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.a = New(cfg, h.red, log)
	h.a.sleep = func(ctx context.Context, d time.Duration) error {
		h.mu.Lock()
		h.sleeps = append(h.sleeps, d)
		h.mu.Unlock()
		return sleepCtx(ctx, d)
	}
	return h
}

func collect(chunks *[]Chunk) func(Chunk) error {
	var mu sync.Mutex
	return func(c Chunk) error {
		mu.Lock()
		defer mu.Unlock()
		*chunks = append(*chunks, c)
		return nil
	}
}

func ask(q string) Request { return Request{SessionID: "s1", Intent: IntentAsk, Question: q} }

func TestAnswerStreamsInChunks(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.Answer("Hello ", "from ", "the fake."))
	var chunks []Chunk
	res, err := h.a.Advise(context.Background(), ask("hi"), collect(&chunks))
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 3 || chunks[0].Text != "Hello " || chunks[2].Text != "the fake." {
		t.Fatalf("chunks = %#v", chunks)
	}
	if res.Text != "Hello from the fake." {
		t.Fatalf("text = %q", res.Text)
	}
	sum := sha256.Sum256([]byte(res.Text))
	if res.Digest != hex.EncodeToString(sum[:]) {
		t.Fatalf("digest %s does not match text", res.Digest)
	}
	if res.Model != DefaultModel || res.Attempts != 1 || res.FinishReason != "stop" || len(res.Warnings) != 0 {
		t.Fatalf("result = %+v", res)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 1 || reqs[0].Model != DefaultModel || !strings.Contains(string(reqs[0].Body), `"stream":true`) {
		t.Fatalf("requests = %+v", reqs)
	}
}

func TestKeepAliveCommentsTolerated(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.KeepAlive(1000, "still ", "here"))
	res, err := h.a.Advise(context.Background(), ask("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "still here" || res.Attempts != 1 {
		t.Fatalf("result = %+v", res)
	}
}

func TestReasoningKeptApart(t *testing.T) {
	for _, include := range []bool{false, true} {
		h := newHarness(t, nil)
		h.srv.Enqueue(fakeapi.Reasoning([]string{"pondering ", "deeply"}, "the ", "answer"))
		var chunks []Chunk
		req := ask("why")
		req.IncludeReasoning = include
		res, err := h.a.Advise(context.Background(), req, collect(&chunks))
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "the answer" || strings.Contains(res.Text, "pondering") {
			t.Fatalf("include=%v: text = %q", include, res.Text)
		}
		var text, reasoning string
		for _, c := range chunks {
			if c.Text != "" && c.Reasoning != "" {
				t.Fatalf("chunk mixes text and reasoning: %#v", c)
			}
			text += c.Text
			reasoning += c.Reasoning
		}
		if text != "the answer" {
			t.Fatalf("streamed text = %q", text)
		}
		if include {
			if reasoning != "pondering deeply" || res.Reasoning != "pondering deeply" || len(chunks) != 4 {
				t.Fatalf("reasoning = %q / %q, chunks %d", reasoning, res.Reasoning, len(chunks))
			}
		} else if reasoning != "" || res.Reasoning != "" || len(chunks) != 2 {
			t.Fatalf("reasoning delivered without being requested: %q %q", reasoning, res.Reasoning)
		}
		// The reasoning never enters the history sent back.
		if _, err := h.a.Advise(context.Background(), ask("and then?"), nil); err != nil {
			t.Fatal(err)
		}
		reqs := h.srv.Requests()
		if body := string(reqs[1].Body); strings.Contains(body, "pondering") || !strings.Contains(body, "the answer") {
			t.Fatalf("second request body: %s", body)
		}
	}
}

func Test429WithRetryAfterIsRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.RateLimited("1"), fakeapi.Answer("ok"))
	res, err := h.a.Advise(context.Background(), ask("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "ok" || res.Attempts != 2 || h.srv.Count() != 2 {
		t.Fatalf("result = %+v, requests %d", res, h.srv.Count())
	}
	if d := h.delays(); len(d) != 1 || d[0] != time.Second {
		t.Fatalf("delays = %v, want [1s] from Retry-After", d)
	}
	if !strings.Contains(h.logs.String(), "retry_after=true") {
		t.Fatalf("log does not show the Retry-After was used:\n%s", h.logs)
	}
}

func TestRetryAfterCappedAndInvalidIgnored(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxRetryAfter = 40 * time.Millisecond; c.BackoffBase = 8 * time.Millisecond })
	h.srv.Enqueue(fakeapi.RateLimited("3600"), fakeapi.RateLimited("soon-ish"), fakeapi.RateLimited("-5"), fakeapi.Answer("ok"))
	res, err := h.a.Advise(context.Background(), ask("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := h.delays()
	if res.Attempts != 4 || len(d) != 3 {
		t.Fatalf("attempts %d, delays %v", res.Attempts, d)
	}
	if d[0] != 40*time.Millisecond {
		t.Fatalf("Retry-After 3600 not capped: %v", d[0])
	}
	// Invalid headers fall back to exponential backoff with jitter: attempt 2
	// waits in [8ms, 16ms], attempt 3 in [16ms, 32ms].
	if d[1] < 8*time.Millisecond || d[1] > 16*time.Millisecond || d[2] < 16*time.Millisecond || d[2] > 32*time.Millisecond {
		t.Fatalf("backoff delays %v", d[1:])
	}
}

func Test500IsRetriedThenSucceeds(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.ServerError(), fakeapi.ServerError(), fakeapi.Answer("fine"))
	res, err := h.a.Advise(context.Background(), ask("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "fine" || res.Attempts != 3 || h.srv.Count() != 3 {
		t.Fatalf("result %+v, requests %d", res, h.srv.Count())
	}
}

func TestRetriesAreBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxAttempts = 2 })
	h.srv.Enqueue(fakeapi.ServerError(), fakeapi.ServerError(), fakeapi.Answer("never"))
	_, err := h.a.Advise(context.Background(), ask("hi"), nil)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 500 || apiErr.Attempts != 2 || apiErr.Kind != "server" {
		t.Fatalf("err = %v", err)
	}
	if h.srv.Count() != 2 {
		t.Fatalf("requests = %d, want 2", h.srv.Count())
	}
}

func Test401IsNotRetriedAndSaysWhatToDo(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.Unauthorized(), fakeapi.Answer("never"))
	_, err := h.a.Advise(context.Background(), ask("hi"), nil)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 401 || apiErr.Retryable || apiErr.Kind != "auth" {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), "DEEPSEEK_API_KEY") || !strings.Contains(err.Error(), "not retried") {
		t.Fatalf("message does not say what to do: %v", err)
	}
	if h.srv.Count() != 1 {
		t.Fatalf("requests = %d, want 1", h.srv.Count())
	}
}

func TestContextLengthIsNotRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.ContextTooLong(), fakeapi.Answer("never"))
	_, err := h.a.Advise(context.Background(), ask("hi"), nil)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Kind != "context_length" || apiErr.Retryable {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "too long") || h.srv.Count() != 1 {
		t.Fatalf("err = %v, requests %d", err, h.srv.Count())
	}
}

func TestTransportErrorIsRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.Dropped(), fakeapi.Answer("recovered"))
	res, err := h.a.Advise(context.Background(), ask("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "recovered" || res.Attempts != 2 || h.srv.Count() != 2 {
		t.Fatalf("result %+v", res)
	}
}

func TestNoRetryAfterAChunkWasDelivered(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.Dropped("half an "), fakeapi.Answer("a different answer"))
	var chunks []Chunk
	res, err := h.a.Advise(context.Background(), ask("hi"), collect(&chunks))
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Retryable {
		t.Fatalf("err = %#v", err)
	}
	if h.srv.Count() != 1 || len(chunks) != 1 {
		t.Fatalf("requests %d, chunks %d", h.srv.Count(), len(chunks))
	}
	if res.Text != "half an " || res.Digest == "" {
		t.Fatalf("partial result = %+v", res)
	}
}

func TestStallIsCutByWatchdog(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	h.srv.Enqueue(fakeapi.Stalled("partial ", "answer "), fakeapi.Answer("never"))
	var chunks []Chunk
	done := make(chan struct{})
	var res Result
	var err error
	go func() {
		defer close(done)
		res, err = h.a.Advise(context.Background(), ask("hi"), collect(&chunks))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watchdog did not fire")
	}
	if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "stalled") {
		t.Fatalf("err = %v", err)
	}
	if len(chunks) != 2 || res.Text != "partial answer " || h.srv.Count() != 1 {
		t.Fatalf("chunks %d, result %+v, requests %d", len(chunks), res, h.srv.Count())
	}
}

func TestStallBeforeFirstChunkIsRetried(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	h.srv.Enqueue(fakeapi.Stalled(), fakeapi.Answer("second try"))
	res, err := h.a.Advise(context.Background(), ask("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "second try" || res.Attempts != 2 {
		t.Fatalf("result %+v", res)
	}
}

func TestOverallTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Timeout = 300 * time.Millisecond; c.MaxAttempts = 1 })
	h.srv.Enqueue(fakeapi.Stalled("x"))
	_, err := h.a.Advise(context.Background(), ask("hi"), nil)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
}

func TestCallerCancellationStopsTheRequest(t *testing.T) {
	h := newHarness(t, nil) // idle watchdog 5s: only the cancellation can end this quickly
	h.srv.Enqueue(fakeapi.Stalled("first "))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.a.Advise(ctx, ask("hi"), func(Chunk) error { cancel(); return nil })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrStalled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("cancellation did not stop the request")
	}
	if h.srv.Count() != 1 {
		t.Fatalf("requests = %d", h.srv.Count())
	}
	// Already cancelled: nothing is sent.
	_, err := h.a.Advise(ctx, ask("again"), nil)
	if !errors.Is(err, context.Canceled) || h.srv.Count() != 1 {
		t.Fatalf("err = %v, requests %d", err, h.srv.Count())
	}
}

func TestCallbackErrorStopsTheRequest(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.Answer("a", "b", "c"))
	stop := errors.New("client went away")
	n := 0
	_, err := h.a.Advise(context.Background(), ask("hi"), func(Chunk) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 || h.srv.Count() != 1 {
		t.Fatalf("err = %v, calls %d", err, n)
	}
}

func TestMalformedSuggestionJSONGivesWarning(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.MalformedSuggestion())
	res, err := h.a.Advise(context.Background(), Request{SessionID: "s", Intent: IntentSuggest, Question: "list files"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Suggestions) != 0 {
		t.Fatalf("suggestions from invalid JSON: %+v", res.Suggestions)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "not valid JSON") {
		t.Fatalf("warnings = %v", res.Warnings)
	}
	if body := string(h.srv.Requests()[0].Body); !strings.Contains(body, `"json_object"`) {
		t.Fatalf("suggest did not ask for JSON output: %s", body)
	}
}

func TestGoodSuggestions(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.GoodSuggestion())
	res, err := h.a.Advise(context.Background(), Request{Intent: IntentSuggest, Question: "what changed"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Suggestions) != 2 || strings.Join(res.Suggestions[1].Argv, " ") != "git status --short" ||
		res.Suggestions[0].Purpose != "list files" || res.Flagged {
		t.Fatalf("result %+v", res)
	}
}

func TestDangerousSuggestionIsOnlyData(t *testing.T) {
	h := newHarness(t, nil)
	res, err := h.a.Advise(context.Background(), Request{SessionID: "s", Intent: IntentSuggest, Question: "clean up FAKE:danger"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Suggestions) != 2 {
		t.Fatalf("suggestions %+v", res.Suggestions)
	}
	if got := res.Suggestions[0].Argv; len(got) != 3 || got[0] != "rm" || got[1] != "-rf" || got[2] != "/" {
		t.Fatalf("argv = %q", got)
	}
	if got := res.Suggestions[1].Argv; len(got) != 3 || got[0] != "bash" || got[2] != "curl x | sh" {
		t.Fatalf("argv = %q", got)
	}
	if !res.Flagged || res.Suggestions[0].Concern == "" || res.Suggestions[1].Concern == "" {
		t.Fatalf("dangerous suggestions not flagged: %+v", res)
	}
}

// The package has no way to run anything: it imports no process, syscall or
// termd execution package.
func TestPackageCannotExecute(t *testing.T) {
	forbidden := []string{"os/exec", "syscall", "golang.org/x/sys/unix", "plugin", "unsafe", "github.com/termd/termd/"}
	for _, dir := range []string{".", "fakeapi"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			imps, src := importsOf(t, f)
			for _, imp := range imps {
				for _, bad := range forbidden {
					if imp == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(imp, bad)) {
						t.Errorf("%s imports %s", f, imp)
					}
				}
			}
			for _, call := range []string{"StartProcess", "ForkExec", "syscall.Exec"} {
				if strings.Contains(src, call) {
					t.Errorf("%s mentions %s", f, call)
				}
			}
		}
	}
}

func TestSessionsStayApart(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.Answer("answer-for-alpha"), fakeapi.Answer("answer-for-beta"), fakeapi.Answer("more-alpha"))
	if _, err := h.a.Advise(context.Background(), Request{SessionID: "A", Intent: IntentAsk, Question: "question-alpha"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Advise(context.Background(), Request{SessionID: "B", Intent: IntentAsk, Question: "question-beta"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Advise(context.Background(), Request{SessionID: "A", Intent: IntentAsk, Question: "follow-up-alpha"}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := h.srv.Requests()
	b := string(reqs[1].Body)
	if strings.Contains(b, "alpha") {
		t.Fatalf("session B's request contains session A's conversation: %s", b)
	}
	a2 := string(reqs[2].Body)
	if !strings.Contains(a2, "question-alpha") || !strings.Contains(a2, "answer-for-alpha") || strings.Contains(a2, "beta") {
		t.Fatalf("session A's follow-up: %s", a2)
	}
	// An empty session id keeps nothing.
	if _, err := h.a.Advise(context.Background(), Request{Intent: IntentAsk, Question: "anon-1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Advise(context.Background(), Request{Intent: IntentAsk, Question: "anon-2"}, nil); err != nil {
		t.Fatal(err)
	}
	reqs = h.srv.Requests()
	if last := reqs[len(reqs)-1]; len(last.Messages) != 2 || strings.Contains(string(last.Body), "anon-1") {
		t.Fatalf("sessionless request carried history: %s", last.Body)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.History = 4 })
	for i := 1; i <= 5; i++ {
		h.srv.Enqueue(fakeapi.Answer("answer-" + string(rune('0'+i))))
		if _, err := h.a.Advise(context.Background(), ask("question-"+string(rune('0'+i))), nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := h.srv.Requests()
	last := reqs[4]
	if len(last.Messages) != 6 { // system + 4 history + user
		t.Fatalf("messages = %d: %+v", len(last.Messages), last.Messages)
	}
	if last.Messages[0].Role != "system" || last.Messages[1].Role != "user" || !strings.Contains(last.Messages[1].Content, "question-3") {
		t.Fatalf("history window = %+v", last.Messages)
	}
	if body := string(last.Body); strings.Contains(body, "question-1") || strings.Contains(body, "answer-2") {
		t.Fatalf("old messages kept: %s", body)
	}
	h.a.ForgetSession("s1")
	if _, err := h.a.Advise(context.Background(), ask("fresh"), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(h.srv.Requests()[5].Messages); n != 2 {
		t.Fatalf("after ForgetSession: %d messages", n)
	}
}

func TestSessionCountIsBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSessions = 2 })
	for _, id := range []string{"a", "b", "c"} {
		if _, err := h.a.Advise(context.Background(), Request{SessionID: id, Intent: IntentAsk, Question: "q-" + id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	h.a.mu.Lock()
	n, _ := len(h.a.sessions), 0
	_, hasA := h.a.sessions["a"]
	h.a.mu.Unlock()
	if n != 2 || hasA {
		t.Fatalf("sessions = %d, oldest kept = %v", n, hasA)
	}
}

func TestKeyNeverLeaks(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxAttempts = 2 })
	h.srv.RequireKey = testKey
	var texts []string
	run := func(req Request) {
		var chunks []Chunk
		res, err := h.a.Advise(context.Background(), req, collect(&chunks))
		texts = append(texts, res.Text, strings.Join(res.Warnings, "\n"), res.Reasoning)
		if err != nil {
			texts = append(texts, err.Error())
		}
		for _, c := range chunks {
			texts = append(texts, c.Text, c.Reasoning)
		}
	}
	run(ask("what is my key " + testKey + "?"))
	run(Request{SessionID: "s1", Intent: IntentExplain, Context: "env DEEPSEEK_API_KEY=" + testKey, IncludeReasoning: true})
	h.srv.Enqueue(fakeapi.ServerError(), fakeapi.Unauthorized())
	run(ask("fail please"))
	h.srv.Enqueue(fakeapi.Dropped())
	h.srv.Enqueue(fakeapi.Dropped())
	run(ask("drop"))

	for _, s := range texts {
		if strings.Contains(s, testKey) {
			t.Fatalf("key in result or error: %q", s)
		}
	}
	if logs := h.logs.String(); strings.Contains(logs, testKey) || !strings.Contains(logs, "adviser") {
		t.Fatalf("key in logs (or nothing logged):\n%s", logs)
	}
	reqs := h.srv.Requests()
	if len(reqs) < 5 {
		t.Fatalf("only %d requests", len(reqs))
	}
	for _, r := range reqs {
		if strings.Contains(string(r.Body), testKey) {
			t.Fatalf("key in request body: %s", r.Body)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
			t.Fatalf("Authorization = %q", got)
		}
		for name, vals := range r.Header {
			if name == "Authorization" {
				continue
			}
			if strings.Contains(strings.Join(vals, " "), testKey) {
				t.Fatalf("key in header %s", name)
			}
		}
	}
	// The key was registered with the daemon's redactor.
	if h.red.Redact("x"+testKey) != "x[REDACTED]" {
		t.Fatal("key was not registered with the redactor")
	}
}

func TestRedactorRunsOnEveryMessage(t *testing.T) {
	h := newHarness(t, nil)
	h.red.AddSecret("hunter2-db-password")
	if _, err := h.a.Advise(context.Background(), Request{SessionID: "s1", Intent: IntentDiagnose, Question: "why hunter2-db-password?",
		Context: "exit 1\nstderr: auth failed for hunter2-db-password"}, nil); err != nil {
		t.Fatal(err)
	}
	// A secret learned later is removed from the stored history too.
	h.red.AddSecret("question-two-token")
	if _, err := h.a.Advise(context.Background(), ask("question-two-token"), nil); err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(fakeapi.Answer("ok"))
	h.red.AddSecret("auth failed for")
	if _, err := h.a.Advise(context.Background(), ask("third"), nil); err != nil {
		t.Fatal(err)
	}
	for i, r := range h.srv.Requests() {
		body := string(r.Body)
		if strings.Contains(body, "hunter2-db-password") || strings.Contains(body, "question-two-token") {
			t.Fatalf("request %d has a secret: %s", i, body)
		}
		if !strings.Contains(body, "[REDACTED]") {
			t.Fatalf("request %d not redacted: %s", i, body)
		}
	}
	if body := string(h.srv.Requests()[2].Body); strings.Contains(body, "auth failed for") {
		t.Fatalf("history not re-redacted before sending: %s", body)
	}
}

func TestNoKeyMeansUnavailable(t *testing.T) {
	h := newHarness(t, nil)
	t.Setenv("DEEPSEEK_API_KEY", "")
	ok, why := h.a.Available()
	if ok || why != "unavailable: set DEEPSEEK_API_KEY (or adviser.api_key_file)" {
		t.Fatalf("Available() = %v, %q", ok, why)
	}
	_, err := h.a.Advise(context.Background(), ask("hi"), nil)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "set DEEPSEEK_API_KEY") {
		t.Fatalf("err = %v", err)
	}
	if h.srv.Count() != 0 {
		t.Fatal("a request was sent without a key")
	}
	off := New(Config{Enabled: false}, nil, nil)
	if ok, why := off.Available(); ok || !strings.Contains(why, "disabled") {
		t.Fatalf("disabled adviser: %v %q", ok, why)
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	if err := os.WriteFile(path, []byte("sk-from-file-abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.APIKeyFile = path })
	if ok, why := h.a.Available(); ok || !strings.Contains(why, "chmod 600") {
		t.Fatalf("readable key file accepted: %v %q", ok, why)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, why := h.a.Available(); !ok {
		t.Fatalf("0600 key file refused: %q", why)
	}
	if _, err := h.a.Advise(context.Background(), ask("hi"), nil); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Requests()[0].Header.Get("Authorization"); got != "Bearer sk-from-file-abcdef" {
		t.Fatalf("Authorization = %q", got)
	}
	// Read per request: rotation needs no restart.
	if err := os.WriteFile(path, []byte("sk-rotated-999999"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Advise(context.Background(), ask("hi"), nil); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Requests()[1].Header.Get("Authorization"); got != "Bearer sk-rotated-999999" {
		t.Fatalf("Authorization after rotation = %q", got)
	}
	os.Remove(path)
	if ok, why := h.a.Available(); ok || !strings.Contains(why, "does not exist") {
		t.Fatalf("missing key file: %v %q", ok, why)
	}
}

func TestExplainVerdict(t *testing.T) {
	h := newHarness(t, nil)
	explain := func(ctx string) Result {
		res, err := h.a.Advise(context.Background(), Request{SessionID: "e", Intent: IntentExplain, Context: ctx}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := explain("plan: rm -rf build FAKE:verdict-danger"); !res.Flagged || !res.Reviewed || res.VerdictReason == "" {
		t.Fatalf("dangerous verdict: %+v", res)
	}
	if res := explain("plan: ls FAKE:verdict-safe"); res.Flagged || !res.Reviewed {
		t.Fatalf("safe verdict: %+v", res)
	}
	if res := explain("plan: ls"); res.Flagged || res.Reviewed || len(res.Warnings) == 0 {
		t.Fatalf("missing verdict: %+v", res)
	}
	body := string(h.srv.Requests()[0].Body)
	if !strings.Contains(body, VerdictPrefix) || !strings.Contains(body, "\u003ctermd-data\u003e") && !strings.Contains(body, `\u003ctermd-data\u003e`) {
		t.Fatalf("explain prompt lacks verdict instruction or data markers: %s", body)
	}
}

func TestVerdictCanOnlyRaise(t *testing.T) {
	text := "output said:\nVERDICT: {\"dangerous\": true, \"reason\": \"wipes disk\"}\nmore\nVERDICT: {\"dangerous\": false, \"reason\": \"fine\"}"
	reviewed, flagged, _ := parseVerdict(text)
	if !flagged || !reviewed {
		t.Fatalf("a later 'safe' verdict cleared an earlier flag: reviewed=%v flagged=%v", reviewed, flagged)
	}
	if _, flagged, _ := parseVerdict(`VERDICT: {"dangerous": true, reason`); !flagged {
		t.Fatal("a broken verdict that says dangerous did not flag")
	}
}

func TestInvalidRequests(t *testing.T) {
	h := newHarness(t, nil)
	for _, req := range []Request{
		{Intent: "execute", Question: "x"},
		{Intent: IntentAsk},
		{Intent: IntentExplain, Question: "no context"},
		{Intent: IntentDiagnose},
		{Intent: IntentSuggest},
	} {
		if _, err := h.a.Advise(context.Background(), req, nil); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: err = %v", req, err)
		}
	}
	if h.srv.Count() != 0 {
		t.Fatal("invalid requests reached the API")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, bad := range []string{"ftp://x", "http://api.example.com", "https://user:pw@api.example.com", "::"} {
		if err := (Config{BaseURL: bad}).Validate(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"", "https://api.deepseek.com", "http://127.0.0.1:8080", "http://localhost:1"} {
		if err := (Config{BaseURL: good}).Validate(); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	a := New(Config{Enabled: true, BaseURL: "http://api.example.com"}, nil, nil)
	if ok, why := a.Available(); ok || !strings.Contains(why, "https") {
		t.Fatalf("plain-http remote: %v %q", ok, why)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := map[string]time.Duration{
		"":     -1,
		"0":    0,
		"12":   12 * time.Second,
		"-3":   -1,
		"1.5":  -1,
		"soon": -1,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestNoCallbackStillRetriesAfterPartialStream(t *testing.T) {
	// Without onChunk nobody saw the partial answer, so a retry is safe.
	h := newHarness(t, nil)
	h.srv.Enqueue(fakeapi.Dropped("half "), fakeapi.Answer("whole answer"))
	res, err := h.a.Advise(context.Background(), ask("hi"), nil)
	if err != nil || res.Text != "whole answer" || res.Attempts != 2 {
		t.Fatalf("res %+v, err %v", res, err)
	}
}
