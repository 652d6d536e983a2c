package adviser

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrUnavailable: no usable key, or the adviser is disabled. The wrapping
	// error says what to set. Everything else in termd keeps working.
	ErrUnavailable = errors.New("unavailable")
	// ErrStalled: the stream delivered no chunk within IdleTimeout and was cut.
	ErrStalled = errors.New("adviser stalled: the API sent nothing within the idle timeout; try again later or raise adviser.idle_timeout")
	// ErrTimeout: the whole request (all attempts) exceeded Config.Timeout.
	ErrTimeout = errors.New("adviser timed out; try again later or raise adviser.timeout")
	// ErrInvalidRequest: the Request itself is wrong (unknown intent, missing text).
	ErrInvalidRequest = errors.New("invalid advice request")
	// ErrInterrupted: the stream broke after part of the answer was delivered.
	// It is not retried, because the caller has already shown those chunks.
	ErrInterrupted = errors.New("adviser stream interrupted after a partial answer; ask again")
)

// APIError is an error answer from the API (or a transport failure, Status 0).
type APIError struct {
	Status    int    // HTTP status; 0 for transport errors and in-stream errors
	Retryable bool   // 429, 5xx and transport errors before any chunk was delivered
	Kind      string // "auth", "rate_limit", "server", "context_length", "balance", "bad_request", "transport", "stream"
	Message   string // the server's message, with secrets removed
	Attempts  int    // attempts made before giving up
}

func (e *APIError) Error() string {
	var hint string
	switch e.Kind {
	case "auth":
		hint = "the API rejected the key: check DEEPSEEK_API_KEY (or adviser.api_key_file) and the account's access; not retried"
	case "context_length":
		hint = "the conversation is too long for the model: start a new session (or forget this one) or send less context; not retried"
	case "balance":
		hint = "the API account has insufficient balance: top it up; not retried"
	case "rate_limit":
		hint = "the API is rate limiting this key: wait and try again"
	case "server":
		hint = "the API failed: try again later"
	case "transport":
		hint = "the API could not be reached: check network access to adviser.base_url"
	case "bad_request":
		hint = "the API refused the request: check adviser.model and adviser.max_tokens; not retried"
	default:
		hint = "the API returned an error"
	}
	msg := e.Message
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	s := "adviser: " + hint
	var parts []string
	if e.Status != 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d", e.Status))
	}
	if msg != "" {
		parts = append(parts, msg)
	}
	if e.Attempts > 1 {
		parts = append(parts, fmt.Sprintf("%d attempts", e.Attempts))
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	return s
}
