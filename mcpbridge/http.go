package mcpbridge

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/loopback"
	"github.com/termd/termd/internal/token"
)

// MaxBodyBytes bounds an HTTP request body.
const MaxBodyBytes = 1 << 20

// HTTPOptions configure the streamable HTTP transport.
type HTTPOptions struct {
	// Token is the bearer token every request must carry.
	Token string
	// AllowedOrigins are browser origins (scheme://host[:port]) allowed to
	// call; requests carrying any other Origin are refused.
	AllowedOrigins []string
	// SessionTimeout closes idle stateful MCP sessions (default 30 min).
	SessionTimeout time.Duration
}

// ReadToken reads a bearer token file and refuses weak or exposed tokens.
func ReadToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("--http needs --token-file: a file holding a bearer token of at least 32 random bytes (e.g. `head -c 32 /dev/urandom | base64 > token; chmod 600 token`)")
	}
	return token.ReadFile(path)
}

// CheckToken refuses tokens that cannot hold 32 random bytes (the same rule
// as termd-gateway's).
func CheckToken(tok string) error { return token.Check(tok) }

// CheckListen refuses to serve plain HTTP on a non-loopback address.
func CheckListen(addr string, tls bool) error {
	loop, err := loopback.Listen(addr)
	if err != nil {
		return fmt.Errorf("--http %q: want HOST:PORT (e.g. 127.0.0.1:8765): %v", addr, err)
	}
	if !loop && !tls {
		return fmt.Errorf("--http %s is not a loopback address: serving the bearer token in clear text off this machine is refused; bind 127.0.0.1 or configure --tls-cert and --tls-key", addr)
	}
	return nil
}

// HTTPHandler serves MCP over streamable HTTP. Every request needs the bearer
// token; cross-origin browser requests are refused; DNS-rebinding protection
// (Host must be loopback when the listener is) and the body limit are on.
//
// Two SDK handlers share the one server: a stateful one for clients that
// open with `initialize` (protocol 2025-11-25 and older, Mcp-Session-Id) and
// a stateless one for 2026-07-28 clients (per-request _meta, no session).
func (b *Bridge) HTTPHandler(o HTTPOptions) (http.Handler, error) {
	if err := CheckToken(o.Token); err != nil {
		return nil, err
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	get := func(*http.Request) *mcp.Server { return b.server }
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		SessionTimeout:      o.SessionTimeout,
		MaxRequestBodyBytes: MaxBodyBytes,
		Logger:              b.log,
	})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: MaxBodyBytes,
		Logger:              b.log,
		// A 2026-07-28 client cancels a call by closing its POST: the
		// handler sees it, and terminal_execute cancels the command.
		PropagateRequestCancellation: true,
	})
	want := []byte("Bearer " + o.Token)
	origins := slices.Clone(o.AllowedOrigins)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(origins, origin) && !sameLoopbackOrigin(r, origin) {
			http.Error(w, "Forbidden: cross-origin request from "+origin, http.StatusForbidden)
			return
		}
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			http.Error(w, "Forbidden: cross-site request", http.StatusForbidden)
			return
		}
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="termd-mcp"`)
			http.Error(w, "Unauthorized: a valid bearer token is required", http.StatusUnauthorized)
			return
		}
		toStateful, err := useStateful(w, r)
		switch {
		case err != nil:
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		case toStateful:
			stateful.ServeHTTP(w, r)
		default:
			stateless.ServeHTTP(w, r)
		}
	}), nil
}

// sameLoopbackOrigin: a page served by this very listener (Origin equal to
// the request's own scheme://Host) may call it, but only when Host is a
// loopback literal — a DNS-rebinding page has the same origin as its Host,
// which is then the attacker's name, not 127.0.0.1.
func sameLoopbackOrigin(r *http.Request, origin string) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return origin == scheme+"://"+r.Host && loopback.Host(host)
}

// useStateful routes a request: anything on an MCP session, and a POST that
// opens one with initialize, goes to the stateful handler; the rest (the
// 2026-07-28 protocol: server/discover and per-request _meta) is stateless.
func useStateful(w http.ResponseWriter, r *http.Request) (bool, error) {
	if r.Header.Get("Mcp-Session-Id") != "" || r.Method != http.MethodPost {
		return true, nil
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v < "2026-07-28" {
		return true, nil
	}
	if r.Body == nil {
		return false, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	r.Body.Close()
	if err != nil {
		return false, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return hasInitialize(body), nil
}

func hasInitialize(body []byte) bool {
	type msg struct {
		Method string `json:"method"`
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var batch []msg
		_ = json.Unmarshal(body, &batch)
		for _, m := range batch {
			if m.Method == "initialize" {
				return true
			}
		}
		return false
	}
	var m msg
	_ = json.Unmarshal(body, &m)
	return m.Method == "initialize"
}
