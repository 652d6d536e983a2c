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

// ResumeStoreBytes bounds the events that the stateful HTTP sessions keep
// so that a client whose stream was cut can resume it (Last-Event-ID): all
// sessions together; past it the SDK drops the oldest event of every
// stream, never the one just stored. Its default, 10 MiB, filled after a
// few thousand calls on sessions left open (~3 KB a tools/list result)
// and was live heap that termd-mcp's GC headroom (GOGC 200) tripled;
// 4 MiB still holds several of the largest results (256 KiB of output).
const ResumeStoreBytes = 4 << 20

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
	// Stateful (2025-11-25) streams are resumable: each POST's SSE stream
	// opens with a priming event (an id to resume from), and a client that
	// lost it reconnects with Last-Event-ID. The store is bounded, all
	// sessions together, at ResumeStoreBytes.
	store := mcp.NewMemoryEventStore(nil)
	store.SetMaxBytes(ResumeStoreBytes)
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		SessionTimeout:      o.SessionTimeout,
		MaxRequestBodyBytes: MaxBodyBytes,
		Logger:              b.sdkLog,
		EventStore:          store,
	})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: MaxBodyBytes,
		Logger:              b.sdkLog,
		// A 2026-07-28 client cancels a call by closing its POST: the
		// handler sees it, and terminal_execute cancels the command.
		PropagateRequestCancellation: true,
	})
	cancels := &httpCancels{} // no response after notifications/cancelled (cancelled.go)
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
		if r.URL.Path == protectedResourcePath {
			serveResourceMetadata(w, r)
			return
		}
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="termd-mcp", resource_metadata="%s"`, selfURL(r)+protectedResourcePath))
			http.Error(w, "Unauthorized: a valid bearer token is required", http.StatusUnauthorized)
			return
		}
		toStateful, err := useStateful(w, r)
		if err == nil && !toStateful && r.Method == http.MethodPost && r.Header.Get("Mcp-Protocol-Version") < "2026-07-28" {
			// Only 2026-07-28 requests (which always say so in the header)
			// are served without a session; an older client's call without
			// Mcp-Session-Id is refused, not served as if it had initialized.
			http.Error(w, "Bad Request: no Mcp-Session-Id; send initialize first (or use protocol 2026-07-28, with its Mcp-Protocol-Version header)", http.StatusBadRequest)
			return
		}
		switch {
		case err != nil:
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		case toStateful:
			sid := r.Header.Get("Mcp-Session-Id")
			if sid == "" {
				stateful.ServeHTTP(w, r)
				return
			}
			if r.Method == http.MethodPost && r.Body != nil {
				body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
				r.Body.Close()
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
					return
				} else if err != nil {
					http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				cancels.note(sid, body)
			}
			stateful.ServeHTTP(&sseFilter{ResponseWriter: w, h: cancels, sid: sid}, r)
			if r.Method == http.MethodDelete {
				cancels.forget(sid)
			}
		default:
			stateless.ServeHTTP(w, r)
		}
	}), nil
}

// protectedResourcePath is where a client that got 401 finds out how to
// authenticate (OAuth 2.0 Protected Resource Metadata, RFC 9728, as MCP's
// authorization spec points clients to it).
const protectedResourcePath = "/.well-known/oauth-protected-resource"

// serveResourceMetadata says: a bearer token in the Authorization header,
// and no authorization server — the token is termd-mcp's --token-file,
// handed to the client by its user, not obtained through OAuth.
func serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"resource":                 selfURL(r) + "/",
		"resource_name":            "termd-mcp (termd's MCP bridge)",
		"bearer_methods_supported": []string{"header"},
		"authorization_servers":    []string{},
		"termd_token":              "a static bearer token: the contents of termd-mcp's --token-file, given to the client by its user (e.g. an Authorization header in the client's MCP server config); there is no OAuth flow",
	})
}

// selfURL is this listener's scheme://host as the client addressed it.
func selfURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// sameLoopbackOrigin: a page served by this very listener (Origin equal to
// the request's own scheme://Host) may call it, but only when Host is a
// loopback literal — a DNS-rebinding page has the same origin as its Host,
// which is then the attacker's name, not 127.0.0.1.
func sameLoopbackOrigin(r *http.Request, origin string) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return origin == selfURL(r) && loopback.Host(host)
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
