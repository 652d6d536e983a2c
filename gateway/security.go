package gateway

import (
	"bytes"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/termd/termd/internal/loopback"
)

// contentSecurityPolicy allows only the gateway's own scripts, styles and
// connections: no inline script, no framing, no plugins.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// hostAllowed reports whether a Host header names this gateway. A DNS
// rebinding attack arrives with the attacker's host name, so anything not
// on the list is refused.
func (g *Gateway) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	for _, h := range g.hosts {
		if host == h {
			return true
		}
	}
	return false
}

// originAllowed reports whether an Origin header is one of the gateway's own.
func (g *Gateway) originAllowed(origin string) bool {
	origin = strings.ToLower(strings.TrimSuffix(origin, "/"))
	for _, o := range g.origins {
		if origin == o {
			return true
		}
	}
	return false
}

// allowedHostsFor lists Host values for a listen address: the address itself
// plus the loopback spellings of the same port.
func allowedHostsFor(listen string, extra []string) []string {
	var out []string
	add := func(s string) {
		s = strings.ToLower(s)
		for _, o := range out {
			if o == s {
				return
			}
		}
		out = append(out, s)
	}
	host, port, err := net.SplitHostPort(listen)
	if err == nil {
		if host != "" {
			add(net.JoinHostPort(host, port))
		}
		if host == "" || loopback.Host(host) {
			add("127.0.0.1:" + port)
			add("localhost:" + port)
			add("[::1]:" + port)
		}
	}
	for _, e := range extra {
		add(e)
	}
	return out
}

// limiter is a token bucket per client key.
type limiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	buckets map[string]*bucket
	now     func() time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(perSecond float64, burst int) *limiter {
	return &limiter{rate: perSecond, burst: float64(burst), buckets: map[string]*bucket{}, now: time.Now}
}

// allow takes one token from key's bucket; when it is empty it returns how
// long until one is available.
func (l *limiter) allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) > 10000 { // forget idle clients rather than grow without bound
			for k, v := range l.buckets {
				if now.Sub(v.last) > time.Minute {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	return false, wait
}

func retryAfterSeconds(d time.Duration) string {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.Itoa(s)
}

// limitBody reads the whole request body up to max bytes so an oversized
// body is answered with 413 before anything reaches the daemon.
func limitBody(w http.ResponseWriter, r *http.Request, max int64) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	if r.ContentLength > max {
		writeError(w, http.StatusRequestEntityTooLarge, "request body is larger than "+strconv.FormatInt(max, 10)+" bytes")
		return false
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	r.Body.Close()
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return false
	}
	if int64(len(b)) > max {
		writeError(w, http.StatusRequestEntityTooLarge, "request body is larger than "+strconv.FormatInt(max, 10)+" bytes")
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	return true
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
