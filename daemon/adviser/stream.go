package adviser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// maxAnswerBytes stops reading an answer that grows without bound.
const maxAnswerBytes = 1 << 20

type streamState struct {
	includeReasoning bool
	onChunk          func(Chunk) error

	delivered  int // calls to onChunk; retries are allowed only while 0
	text       strings.Builder
	reasoning  strings.Builder
	model      string
	finish     string
	warnings   []string
	retryAfter time.Duration // from the last failed attempt; -1 when absent or invalid
}

// reset clears a failed attempt's partial state. Only called when nothing was
// delivered, so the discarded text was never seen by the caller.
func (st *streamState) reset() {
	st.text.Reset()
	st.reasoning.Reset()
	st.model, st.finish, st.warnings = "", "", nil
}

// callbackError marks an error returned by onChunk.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

// captureDoer records the Retry-After header of an error response, which
// go-openai does not expose.
type captureDoer struct {
	inner openai.HTTPDoer
	mu    sync.Mutex
	ra    string
}

func (c *captureDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.inner.Do(req)
	if err == nil && resp.StatusCode >= 400 {
		c.mu.Lock()
		c.ra = resp.Header.Get("Retry-After")
		c.mu.Unlock()
	}
	return resp, err
}

func (c *captureDoer) retryAfter() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ra
}

// parseRetryAfter accepts delay-seconds or an HTTP date; anything else
// (negative, garbage, absurdly long) is invalid and returns -1.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
		return 0
	}
	return -1
}

// attempt makes one streamed request. caller is the caller's context (to
// tell cancellation from timeout); tctx carries the overall timeout.
func (a *Adviser) attempt(caller, tctx context.Context, key string, creq openai.ChatCompletionRequest, st *streamState, scrub func(string) string) error {
	actx, cancel := context.WithCancel(tctx)
	defer cancel()
	var stalled atomic.Bool
	idle := a.cfg.IdleTimeout
	watchdog := time.AfterFunc(idle, func() { stalled.Store(true); cancel() })
	defer watchdog.Stop()

	doer := &captureDoer{inner: a.http}
	oc := openai.DefaultConfig(key)
	oc.BaseURL = a.cfg.BaseURL
	oc.HTTPClient = doer
	oc.EmptyMessagesLimit = emptyMessagesLimit
	client := openai.NewClientWithConfig(oc)

	st.retryAfter = -1
	fail := func(err error) error {
		if stalled.Load() {
			return ErrStalled
		}
		if cerr := a.ctxErr(caller, tctx); cerr != nil {
			return cerr
		}
		st.retryAfter = parseRetryAfter(doer.retryAfter(), time.Now())
		return classify(err, st.delivered, scrub)
	}

	stream, err := client.CreateChatCompletionStream(actx, creq)
	if err != nil {
		return fail(err)
	}
	defer stream.Close()
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) && !stalled.Load() && actx.Err() == nil {
			return nil
		}
		if err != nil {
			return fail(err)
		}
		if !watchdog.Stop() {
			return ErrStalled // fired while this chunk was arriving
		}
		if resp.Model != "" {
			st.model = resp.Model
		}
		var ch Chunk
		for _, c := range resp.Choices {
			if c.Index != 0 {
				continue
			}
			ch.Text += c.Delta.Content
			ch.Reasoning += c.Delta.ReasoningContent
			if c.FinishReason != "" {
				st.finish = string(c.FinishReason)
			}
		}
		st.text.WriteString(ch.Text)
		if st.includeReasoning {
			st.reasoning.WriteString(ch.Reasoning)
		} else {
			ch.Reasoning = ""
		}
		if st.text.Len()+st.reasoning.Len() > maxAnswerBytes {
			st.warnings = append(st.warnings, fmt.Sprintf("the answer exceeded %d bytes and was cut", maxAnswerBytes))
			st.finish = "length"
			return nil
		}
		if (ch.Text != "" || ch.Reasoning != "") && st.onChunk != nil {
			st.delivered++ // from here on a retry would show a second answer
			if err := st.onChunk(ch); err != nil {
				return &callbackError{err}
			}
		}
		watchdog.Reset(idle)
	}
}

// classify turns a go-openai or transport error into an *APIError.
func classify(err error, delivered int, scrub func(string) string) error {
	var (
		status int
		msg    string
		code   string
	)
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
		msg = apiErr.Message
		if s, ok := apiErr.Code.(string); ok {
			code = s
		}
		if apiErr.Type != "" && code == "" {
			code = apiErr.Type
		}
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
		msg = strings.TrimSpace(string(reqErr.Body))
		if len(msg) > 200 || strings.HasPrefix(msg, "<") {
			msg = http.StatusText(status)
		}
	default:
		kind := "transport"
		if errors.Is(err, openai.ErrTooManyEmptyStreamMessages) {
			kind = "stream"
		}
		return &APIError{Kind: kind, Retryable: delivered == 0, Message: scrub(err.Error())}
	}
	e := &APIError{Status: status, Message: scrub(msg)}
	lower := strings.ToLower(msg + " " + code)
	switch {
	case status == 0:
		e.Kind, e.Retryable = "stream", delivered == 0
	case status == 401 || status == 403:
		e.Kind = "auth"
	case status == 402:
		e.Kind = "balance"
	case strings.Contains(lower, "context length") || strings.Contains(lower, "context_length") ||
		strings.Contains(lower, "maximum context") || strings.Contains(lower, "too many tokens"):
		e.Kind = "context_length"
	case status == 429:
		e.Kind, e.Retryable = "rate_limit", true
	case status == 408 || status >= 500:
		e.Kind, e.Retryable = "server", true
	default:
		e.Kind = "bad_request"
	}
	if delivered > 0 {
		e.Retryable = false
	}
	return e
}
