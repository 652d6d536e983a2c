// Package adviser is termd's DeepSeek (OpenAI-compatible) adviser: it explains
// plans and policy decisions, proposes candidate argv lists for a task and
// diagnoses failed receipts.
//
// Advice is data. Nothing in this package executes, plans or approves
// anything, and nothing here may lower the scrutiny a plan receives: the only
// influence a model answer can have is Result.Flagged = true (raise).
package adviser

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Defaults applied by New to zero fields of Config.
const (
	DefaultBaseURL       = "https://api.deepseek.com"
	DefaultModel         = "deepseek-v4-flash"
	DefaultAPIKeyEnv     = "DEEPSEEK_API_KEY"
	DefaultTimeout       = 120 * time.Second
	DefaultIdleTimeout   = 30 * time.Second
	DefaultMaxTokens     = 1024
	DefaultMaxAttempts   = 4
	DefaultBackoffBase   = 500 * time.Millisecond
	DefaultMaxBackoff    = 10 * time.Second
	DefaultMaxRetryAfter = 30 * time.Second
	DefaultMaxSessions   = 256
	DefaultMaxContext    = 64 << 10 // bytes of Request.Context/Question sent to the model
	DefaultMaxConcurrent = 4
	// emptyMessagesLimit replaces go-openai's default of 300 non-data lines
	// in a row: DeepSeek sends ": keep-alive" comments while a request waits.
	// Stalls are caught by the idle watchdog and Timeout, not by this count.
	emptyMessagesLimit = 1 << 30
)

// Config configures the adviser. Zero values take the defaults above, except
// History: 0 keeps no conversation history (like the daemon's config file).
type Config struct {
	Enabled bool
	// BaseURL of the OpenAI-compatible API. https is required unless the host
	// is a loopback address (test servers), so the key never crosses a network
	// in clear text.
	BaseURL string
	Model   string
	// APIKeyEnv names the environment variable holding the key; APIKeyFile a
	// file (mode 0600 or stricter) holding it. The file wins when both are set.
	// The key is read per request, so rotation needs no restart.
	APIKeyEnv, APIKeyFile string
	// Timeout bounds one Advise call including all retries; IdleTimeout cancels
	// a stream when no chunk arrives for that long.
	Timeout, IdleTimeout time.Duration
	MaxTokens            int
	// MaxAttempts bounds attempts for 429/5xx/transport errors.
	MaxAttempts int
	// History is the number of messages (user and assistant) kept per session.
	History int
	// HTTPClient is used for API calls (tests); nil uses a client without an
	// overall timeout (the adviser's own Timeout and IdleTimeout apply).
	HTTPClient *http.Client
	// BackoffBase is the first retry delay (doubled per attempt, with jitter).
	BackoffBase time.Duration
	// MaxBackoff caps the computed backoff; MaxRetryAfter caps a server's
	// Retry-After.
	MaxBackoff, MaxRetryAfter time.Duration
	// MaxSessions bounds how many sessions' histories are kept (least recently
	// used are forgotten first).
	MaxSessions int
	// MaxContextBytes bounds Request.Question and Request.Context each; longer
	// text is cut (with a warning in the result).
	MaxContextBytes int
	// MaxConcurrent bounds simultaneous requests to the API.
	MaxConcurrent int
}

func (c Config) withDefaults() Config {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.APIKeyEnv == "" && c.APIKeyFile == "" {
		c.APIKeyEnv = DefaultAPIKeyEnv
	}
	positiveOr(&c.Timeout, DefaultTimeout)
	positiveOr(&c.IdleTimeout, DefaultIdleTimeout)
	positiveOr(&c.MaxTokens, DefaultMaxTokens)
	positiveOr(&c.MaxAttempts, DefaultMaxAttempts)
	if c.History < 0 {
		c.History = 0
	}
	positiveOr(&c.BackoffBase, DefaultBackoffBase)
	positiveOr(&c.MaxBackoff, DefaultMaxBackoff)
	positiveOr(&c.MaxRetryAfter, DefaultMaxRetryAfter)
	positiveOr(&c.MaxSessions, DefaultMaxSessions)
	positiveOr(&c.MaxContextBytes, DefaultMaxContext)
	positiveOr(&c.MaxConcurrent, DefaultMaxConcurrent)
	return c
}

// positiveOr sets *v to def when it is zero or negative (unset).
func positiveOr[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Validate reports a configuration the adviser cannot use safely. It does not
// require a key to be present (a missing key only makes the adviser
// unavailable).
func (c Config) Validate() error {
	c = c.withDefaults()
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("adviser.base_url: %q is not an http(s) URL", c.BaseURL)
	}
	if u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
		return fmt.Errorf("adviser.base_url: %q uses plain http to a non-loopback host; the API key would cross the network in clear text (use https)", c.BaseURL)
	}
	if u.User != nil {
		return fmt.Errorf("adviser.base_url: credentials in the URL are not allowed; use adviser.api_key_env or adviser.api_key_file")
	}
	if strings.TrimSpace(c.Model) == "" {
		return errors.New("adviser.model: empty")
	}
	return nil
}

// isLoopbackHost is internal/loopback.Host, kept here because this package
// imports nothing from termd (TestPackageCannotExecute).
func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// resolveKey reads the credential reference. It never returns the key inside
// an error.
func (c Config) resolveKey() (string, error) {
	if c.APIKeyFile != "" {
		return readKeyFile(c.APIKeyFile)
	}
	v := strings.TrimSpace(os.Getenv(c.APIKeyEnv))
	if v == "" {
		if c.APIKeyEnv != DefaultAPIKeyEnv {
			return "", fmt.Errorf("%w: set %s (or adviser.api_key_file)", ErrUnavailable, c.APIKeyEnv)
		}
		return "", fmt.Errorf("%w: set %s (or adviser.api_key_file)", ErrUnavailable, DefaultAPIKeyEnv)
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("%w: %s contains a line break; it must hold only the key", ErrUnavailable, c.APIKeyEnv)
	}
	return v, nil
}

const maxKeyFileSize = 4096

func readKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%w: adviser.api_key_file %s does not exist; create it with mode 0600 or set DEEPSEEK_API_KEY", ErrUnavailable, path)
		}
		return "", fmt.Errorf("%w: adviser.api_key_file %s cannot be opened: %v", ErrUnavailable, path, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat() // the opened file, not the name: no swap between check and read
	if err != nil {
		return "", fmt.Errorf("%w: adviser.api_key_file %s: %v", ErrUnavailable, path, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: adviser.api_key_file %s is not a regular file", ErrUnavailable, path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%w: adviser.api_key_file %s has mode %04o; others may read it: chmod 600 %s", ErrUnavailable, path, perm, path)
	}
	buf, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return "", fmt.Errorf("%w: adviser.api_key_file %s cannot be read", ErrUnavailable, path)
	}
	n := len(buf)
	if n > maxKeyFileSize {
		return "", fmt.Errorf("%w: adviser.api_key_file %s is larger than %d bytes; it must hold only the key", ErrUnavailable, path, maxKeyFileSize)
	}
	v := strings.TrimSpace(string(buf[:n]))
	if v == "" {
		return "", fmt.Errorf("%w: adviser.api_key_file %s is empty", ErrUnavailable, path)
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("%w: adviser.api_key_file %s must hold only the key on one line", ErrUnavailable, path)
	}
	return v, nil
}
