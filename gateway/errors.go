package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every error the gateway answers has one body: {"code": HTTP status,
// "status": gRPC code name, "message": what was wrong and what to do} —
// the daemon's refusals, the gateway's own (401, 403, 405, 429) and the
// error that ends a streamed response.

// writeError answers an error the gateway itself decided.
func writeError(w http.ResponseWriter, httpStatus int, msg string) {
	writeJSON(w, httpStatus, errorBody(httpStatus, codeForHTTP(httpStatus), msg))
}

func errorBody(httpStatus int, c codes.Code, msg string) map[string]any {
	return map[string]any{"code": httpStatus, "status": codeName(c), "message": msg}
}

// codeName is a gRPC code as google.rpc.Code spells it (NOT_FOUND).
func codeName(c codes.Code) string {
	s := c.String()
	if s == "OK" {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// codeForHTTP names the gateway's own refusals.
func codeForHTTP(s int) codes.Code {
	switch s {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusMethodNotAllowed:
		return codes.Unimplemented
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return codes.Unavailable
	}
	return codes.Internal
}

// apiError answers a daemon call that failed.
func apiError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	st := status.Convert(err)
	writeJSON(w, runtime.HTTPStatusFromCode(st.Code()), errorBody(runtime.HTTPStatusFromCode(st.Code()), st.Code(), st.Message()))
}

// routingError answers a request no route takes: 404, or 405 with Allow
// when the path exists for other methods (grpc-gateway says 501).
func routingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		allow := allowedMethods(r.URL.Path)
		if allow != "" {
			w.Header().Set("Allow", allow)
		}
		writeError(w, httpStatus, r.Method+" is not a method of "+r.URL.Path+"; it takes "+allow)
	case http.StatusNotFound:
		writeError(w, httpStatus, "no route "+r.URL.Path+"; see /openapi.json")
	default:
		writeError(w, httpStatus, http.StatusText(httpStatus))
	}
}

// routeTemplates are the document's paths as patterns, with their methods.
var routeTemplates = sync.OnceValue(func() []routeTemplate {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	_ = json.Unmarshal(openAPIDocument(), &doc)
	var out []routeTemplate
	for p, ops := range doc.Paths {
		re := regexp.QuoteMeta(p)
		re = regexp.MustCompile(`\\\{[a-z_.]+\\\}`).ReplaceAllString(re, `[^/:]+`)
		var methods []string
		for m := range ops {
			methods = append(methods, strings.ToUpper(m))
		}
		sort.Strings(methods)
		out = append(out, routeTemplate{regexp.MustCompile("^" + re + "$"), strings.Join(methods, ", ")})
	}
	return out
})

type routeTemplate struct {
	re      *regexp.Regexp
	methods string
}

// allowedMethods are the methods of the route a path matches ("" if none).
func allowedMethods(path string) string {
	for _, t := range routeTemplates() {
		if t.re.MatchString(path) {
			return t.methods
		}
	}
	return ""
}

// streamError is the error that ends a streamed response
// ({"error": {"code": ..., "message": ...}}): its code is the HTTP status,
// as in every other error body.
func streamError(ctx context.Context, err error) *status.Status {
	st := status.Convert(err)
	if c, ok := ctx.Value(streamCodeKey{}).(*codes.Code); ok {
		*c = st.Code()
	}
	return status.New(codes.Code(runtime.HTTPStatusFromCode(st.Code())), st.Message())
}

// streamCodeKey holds, in a routed request's context, where streamError
// leaves the gRPC code of the error that ended a stream.
type streamCodeKey struct{}

// streamStart answers a streamed route that fails before its first message
// like any other refused call: the daemon's status (grpc-gateway mapped the
// stream error's HTTP-status code to 500) and the one error body. Once a
// message is out, the stream's own error chunk ends it as documented.
type streamStart struct {
	http.ResponseWriter
	code    codes.Code // set by streamError
	pending bool       // an error status was held back: nothing is out yet
	done    bool       // the error body is written; the rest is dropped
	started bool
}

func (w *streamStart) WriteHeader(code int) {
	if !w.started && code >= 400 && w.code != codes.OK {
		w.pending = true
		return
	}
	w.started = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *streamStart) Write(b []byte) (int, error) {
	switch {
	case w.done:
		return len(b), nil
	case w.pending:
		var chunk struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &chunk)
		hs := runtime.HTTPStatusFromCode(w.code)
		writeJSON(w.ResponseWriter, hs, errorBody(hs, w.code, chunk.Error.Message))
		w.done, w.started = true, true
		return len(b), nil
	}
	w.started = true
	return w.ResponseWriter.Write(b)
}

func (w *streamStart) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.pending {
		f.Flush()
	}
}

func (w *streamStart) Unwrap() http.ResponseWriter { return w.ResponseWriter }
