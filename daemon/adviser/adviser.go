package adviser

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Redactor removes secrets from text. The daemon passes its receipt redactor.
type Redactor interface{ Redact(string) string }

// SecretAdder is implemented by redactors that learn new secret values (as
// termd's receipt redactor does). The adviser registers its key with it every
// time the key is read, so the key is removed wherever the redactor runs.
type SecretAdder interface{ AddSecret(string) }

// Request is one question to the adviser.
type Request struct {
	// SessionID keys the conversation history. Empty means no history is
	// read or kept for this request.
	SessionID string
	Intent    Intent
	Question  string
	// Context is the plan, decision or receipt text prepared by the daemon,
	// already redacted (it is redacted again before sending).
	Context string
	// IncludeReasoning delivers the model's reasoning_content in
	// Chunk.Reasoning and Result.Reasoning. It never enters Text or Digest.
	IncludeReasoning bool
}

// Result is the final, structured answer.
type Result struct {
	Text        string       // the answer as streamed (reasoning excluded)
	Reasoning   string       // only when Request.IncludeReasoning
	Suggestions []Suggestion // suggest intent only; data, never executed
	// Flagged is true when the review says the plan is dangerous, or a
	// suggestion raised a concern. It may raise scrutiny; false never lowers it.
	Flagged bool
	// Reviewed is true when the explain answer ended with a valid verdict.
	Reviewed      bool
	VerdictReason string
	Digest        string // sha256 hex of Text, for receipts to record that advice was shown
	Model         string
	Warnings      []string
	Attempts      int
	FinishReason  string
}

// Chunk is a piece of the streamed answer. Reasoning (reasoning_content) is
// never put into Text; it is set only when Request.IncludeReasoning.
type Chunk struct{ Text, Reasoning string }

// Adviser answers advice requests. It is safe for concurrent use.
type Adviser struct {
	cfg    Config
	cfgErr error
	red    Redactor
	log    *slog.Logger
	http   openai.HTTPDoer
	sem    chan struct{}

	mu       sync.Mutex
	sessions map[string]*session
	clock    uint64

	// test hooks
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func() float64
}

type session struct {
	msgs []openai.ChatCompletionMessage
	used uint64
}

type noRedactor struct{}

func (noRedactor) Redact(s string) string { return s }

// New builds an adviser. A bad config does not fail here: the adviser reports
// itself unavailable with the reason (the daemon's config loader validates
// first and refuses to start, see Config.Validate).
func New(cfg Config, red Redactor, log *slog.Logger) *Adviser {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	a := &Adviser{
		cfg:      cfg,
		cfgErr:   cfg.Validate(),
		red:      red,
		log:      log.With("component", "adviser"),
		sem:      make(chan struct{}, cfg.MaxConcurrent),
		sessions: map[string]*session{},
		sleep:    sleepCtx,
		jitter:   rand.Float64,
	}
	if red == nil {
		a.red = noRedactor{}
		a.log.Warn("adviser has no redactor; only its own key is removed from prompts")
	}
	if cfg.HTTPClient != nil {
		a.http = cfg.HTTPClient
	} else {
		a.http = &http.Client{}
	}
	return a
}

// Available reports whether Advise can work now, and if not, what to do.
func (a *Adviser) Available() (bool, string) {
	if !a.cfg.Enabled {
		return false, "unavailable: the adviser is disabled (adviser.enabled: false)"
	}
	if a.cfgErr != nil {
		return false, "unavailable: " + a.cfgErr.Error()
	}
	if _, err := a.cfg.resolveKey(); err != nil {
		return false, err.Error()
	}
	return true, fmt.Sprintf("available: model %s at %s", a.cfg.Model, a.cfg.BaseURL)
}

// ForgetSession drops a session's conversation history.
func (a *Adviser) ForgetSession(id string) {
	a.mu.Lock()
	delete(a.sessions, id)
	a.mu.Unlock()
}

const maxSessionIDLen = 256

func (a *Adviser) checkRequest(req *Request) error {
	in, err := ParseIntent(string(req.Intent))
	if err != nil {
		return err
	}
	req.Intent = in
	if len(req.SessionID) > maxSessionIDLen {
		return fmt.Errorf("%w: session id longer than %d bytes", ErrInvalidRequest, maxSessionIDLen)
	}
	q, c := strings.TrimSpace(req.Question), strings.TrimSpace(req.Context)
	switch in {
	case IntentAsk:
		if q == "" {
			return fmt.Errorf("%w: ask needs a question", ErrInvalidRequest)
		}
	case IntentSuggest:
		if q == "" {
			return fmt.Errorf("%w: suggest needs a task in the question", ErrInvalidRequest)
		}
	case IntentExplain:
		if c == "" {
			return fmt.Errorf("%w: explain needs the plan or decision as context", ErrInvalidRequest)
		}
	case IntentDiagnose:
		if c == "" {
			return fmt.Errorf("%w: diagnose needs the failed receipt as context", ErrInvalidRequest)
		}
	}
	return nil
}

// Advise asks the model and streams the answer to onChunk (which may be nil),
// then returns the structured result.
//
// Retries (429, 5xx, transport errors, a stall before the first chunk) happen
// only while nothing has been delivered to onChunk: once the caller has shown
// part of an answer, a retry would show a different answer after it, so a
// failure after the first chunk returns the partial Result (Text and Digest
// of what was delivered) with ErrStalled or ErrInterrupted.
//
// If onChunk returns an error the request stops and that error is returned.
// Cancelling ctx stops the request at once.
func (a *Adviser) Advise(ctx context.Context, req Request, onChunk func(Chunk) error) (Result, error) {
	if err := a.checkRequest(&req); err != nil {
		return Result{}, err
	}
	if ok, why := a.Available(); !ok {
		return Result{}, fmt.Errorf("adviser %w%s", ErrUnavailable, strings.TrimPrefix(why, "unavailable"))
	}
	key, err := a.cfg.resolveKey()
	if err != nil {
		return Result{}, fmt.Errorf("adviser %w", err)
	}
	if sa, ok := a.red.(SecretAdder); ok {
		sa.AddSecret(key)
	}
	scrub := func(s string) string {
		return strings.ReplaceAll(a.red.Redact(s), key, "[REDACTED]")
	}

	var res Result
	res.Model = a.cfg.Model
	question, cutQ := truncateUTF8(req.Question, a.cfg.MaxContextBytes)
	contextText, cutC := truncateUTF8(req.Context, a.cfg.MaxContextBytes)
	if cutQ || cutC {
		res.Warnings = append(res.Warnings, fmt.Sprintf("input longer than %d bytes was cut before sending", a.cfg.MaxContextBytes))
	}
	user := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: scrub(userPrompt(req, question, contextText))}
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: systemPrompt(req.Intent)}}
	msgs = append(msgs, a.history(req.SessionID)...)
	msgs = append(msgs, user)
	for i := range msgs { // every message, every time: the redactor may know more now
		msgs[i].Content = scrub(msgs[i].Content)
		msgs[i].ReasoningContent = ""
	}
	creq := openai.ChatCompletionRequest{Model: a.cfg.Model, Messages: msgs, MaxTokens: a.cfg.MaxTokens}
	if req.Intent == IntentSuggest {
		creq.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	}

	tctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	select { // waiting for a slot counts against the timeout
	case a.sem <- struct{}{}:
		defer func() { <-a.sem }()
	case <-tctx.Done():
		return Result{}, a.ctxErr(ctx, tctx)
	}

	log := a.log.With("session", req.SessionID, "intent", string(req.Intent), "model", a.cfg.Model)
	start := time.Now()
	st := &streamState{includeReasoning: req.IncludeReasoning, onChunk: onChunk}
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		aerr := a.attempt(ctx, tctx, key, creq, st, scrub)
		if aerr == nil {
			break
		}
		var apiErr *APIError
		if errors.As(aerr, &apiErr) {
			apiErr.Attempts = attempt
		}
		retryable := apiErr != nil && apiErr.Retryable || errors.Is(aerr, ErrStalled)
		if st.delivered > 0 || !retryable || attempt >= a.cfg.MaxAttempts {
			log.Warn("adviser request failed", "attempt", attempt, "error", scrub(aerr.Error()), "delivered_chunks", st.delivered, "elapsed", time.Since(start).Round(time.Millisecond))
			if st.delivered > 0 && apiErr != nil {
				aerr = fmt.Errorf("%w: %w", ErrInterrupted, aerr)
			}
			return a.partial(res, st, aerr)
		}
		delay, fromHeader := a.backoff(attempt, st.retryAfter)
		if dl, ok := tctx.Deadline(); ok && time.Until(dl) < delay {
			log.Warn("adviser giving up: retry would pass the timeout", "attempt", attempt, "delay", delay)
			return a.partial(res, st, aerr)
		}
		log.Warn("adviser retrying", "attempt", attempt, "error", scrub(aerr.Error()), "delay", delay.Round(time.Millisecond), "retry_after", fromHeader)
		st.reset()
		if err := a.sleep(tctx, delay); err != nil {
			return Result{}, a.ctxErr(ctx, tctx)
		}
	}
	res.Text = st.text.String()
	res.FinishReason = st.finish
	if st.model != "" {
		res.Model = st.model
	}
	if req.IncludeReasoning {
		res.Reasoning = st.reasoning.String()
	}
	res.Warnings = append(res.Warnings, st.warnings...)
	switch st.finish {
	case "stop", "":
		if st.finish == "" {
			res.Warnings = append(res.Warnings, "the stream ended without a finish reason; the answer may be incomplete")
		}
	case "length":
		res.Warnings = append(res.Warnings, "the answer was cut at adviser.max_tokens")
	default:
		res.Warnings = append(res.Warnings, "the answer ended with finish reason "+st.finish)
	}
	a.interpret(req.Intent, &res)
	res.Digest = digest(res.Text)
	a.remember(req.SessionID, user, res.Text)
	log.Info("adviser answered", "attempts", res.Attempts, "chunks", st.delivered, "bytes", len(res.Text), "flagged", res.Flagged, "elapsed", time.Since(start).Round(time.Millisecond))
	return res, nil
}

// partial returns what was delivered before a failure, so the caller can
// record a digest of the advice it already showed.
func (a *Adviser) partial(res Result, st *streamState, err error) (Result, error) {
	if st.delivered == 0 {
		return Result{}, err
	}
	res.Text = st.text.String()
	if st.includeReasoning {
		res.Reasoning = st.reasoning.String()
	}
	res.Digest = digest(res.Text)
	res.Warnings = append(res.Warnings, "the answer is incomplete: "+err.Error())
	return res, err
}

func (a *Adviser) interpret(in Intent, res *Result) {
	switch in {
	case IntentExplain:
		reviewed, flagged, reason := parseVerdict(res.Text)
		res.Reviewed, res.VerdictReason = reviewed, reason
		if flagged {
			res.Flagged = true
		}
		if !reviewed {
			res.Warnings = append(res.Warnings, "the model gave no valid machine-readable verdict; treat the plan as unreviewed")
		}
	case IntentSuggest:
		sugg, warns := parseSuggestions(res.Text)
		res.Suggestions = sugg
		res.Warnings = append(res.Warnings, warns...)
		for _, s := range sugg {
			if s.Concern != "" {
				res.Flagged = true
				res.Warnings = append(res.Warnings, fmt.Sprintf("suggestion %q: %s", strings.Join(s.Argv, " "), s.Concern))
			}
		}
	}
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func (a *Adviser) ctxErr(caller, tctx context.Context) error {
	if caller.Err() != nil {
		return fmt.Errorf("adviser: request cancelled: %w", caller.Err())
	}
	if tctx.Err() != nil {
		return fmt.Errorf("%w (after %s)", ErrTimeout, a.cfg.Timeout)
	}
	return nil
}

// backoff is base*2^(attempt-1), capped, with jitter in [d/2, d]. A valid
// Retry-After (capped at MaxRetryAfter) replaces it.
func (a *Adviser) backoff(attempt int, retryAfter time.Duration) (time.Duration, bool) {
	if retryAfter >= 0 {
		return min(retryAfter, a.cfg.MaxRetryAfter), true
	}
	d := a.cfg.BackoffBase
	for i := 1; i < attempt && d < a.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, a.cfg.MaxBackoff)
	return d/2 + time.Duration(a.jitter()*float64(d/2)), false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// history returns a copy of the session's messages.
func (a *Adviser) history(id string) []openai.ChatCompletionMessage {
	if id == "" || a.cfg.History == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[id]
	if s == nil {
		return nil
	}
	a.clock++
	s.used = a.clock
	return append([]openai.ChatCompletionMessage(nil), s.msgs...)
}

func (a *Adviser) remember(id string, user openai.ChatCompletionMessage, answer string) {
	if id == "" || a.cfg.History == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[id]
	if s == nil {
		if len(a.sessions) >= a.cfg.MaxSessions {
			a.evictLocked()
		}
		s = &session{}
		a.sessions[id] = s
	}
	a.clock++
	s.used = a.clock
	s.msgs = append(s.msgs, user, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: answer})
	if n := len(s.msgs) - a.cfg.History; n > 0 {
		s.msgs = append([]openai.ChatCompletionMessage(nil), s.msgs[n:]...)
	}
	// A conversation starts with a user turn.
	for len(s.msgs) > 0 && s.msgs[0].Role != openai.ChatMessageRoleUser {
		s.msgs = s.msgs[1:]
	}
}

func (a *Adviser) evictLocked() {
	var oldest string
	var used uint64
	for id, s := range a.sessions {
		if oldest == "" || s.used < used {
			oldest, used = id, s.used
		}
	}
	delete(a.sessions, oldest)
}
