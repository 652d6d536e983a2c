package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Every error has one body, {"code": HTTP status, "status": gRPC code name,
// "message"}, whoever refused: the daemon, the router or the gateway.
func TestErrorBodiesAndMethods(t *testing.T) {
	e := newEnv(t)
	type body struct {
		Code    int    `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	check := func(method, path, token string, want int, wantStatus string) *http.Response {
		t.Helper()
		res := e.do(method, path, token, nil)
		code, raw := status(t, res)
		var b body
		if err := json.Unmarshal([]byte(raw), &b); err != nil || code != want || b.Code != want || b.Status != wantStatus || b.Message == "" {
			t.Errorf("%s %s: %d %s; want %d with code %d and status %s", method, path, code, raw, want, want, wantStatus)
		}
		return res
	}
	check("GET", "/v1/plans/no-such-plan", e.Operator, http.StatusNotFound, "NOT_FOUND")                     // the daemon
	check("GET", "/v1/status", "", http.StatusUnauthorized, "UNAUTHENTICATED")                               // the gateway
	check("POST", "/v1/plans", e.Viewer, http.StatusForbidden, "PERMISSION_DENIED")                          // the daemon, by role
	check("GET", "/v1/executions/x/output?offset=-5", e.Operator, http.StatusBadRequest, "INVALID_ARGUMENT") // the daemon
	// A streaming route refused before its first message: the daemon's code,
	// not 500 (issue 31: POST /v1/advise without an adviser answered 500).
	check("POST", "/v1/advise", e.Operator, http.StatusServiceUnavailable, "UNAVAILABLE")
	res := check("PUT", "/v1/plans", e.Operator, http.StatusMethodNotAllowed, "UNIMPLEMENTED") // the router: 405, not 501
	if allow := res.Header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Errorf("405 for /v1/plans should list its methods in Allow, got %q", allow)
	}
	res = check("DELETE", "/v1/plans/abc:approve", e.Operator, http.StatusMethodNotAllowed, "UNIMPLEMENTED")
	if allow := res.Header.Get("Allow"); allow != "POST" {
		t.Errorf("405 for :approve should allow POST, got %q", allow)
	}
}

// A client built from /openapi.json alone (no knowledge of termd): it finds
// the operation by its id, the path and the security scheme in the
// document, and calls the authenticated route with the header the scheme
// names.
func TestClientFromTheDocument(t *testing.T) {
	e := newEnv(t)
	res := e.do("GET", "/openapi.json", "", nil)
	var doc struct {
		SecurityDefinitions map[string]struct{ Type, In, Name string } `json:"securityDefinitions"`
		Security            []map[string][]string                      `json:"security"`
		Paths               map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var path, method string
	for p, ops := range doc.Paths {
		for m, op := range ops {
			if op.OperationID == "DaemonService_GetStatus" {
				path, method = p, strings.ToUpper(m)
			}
		}
	}
	if path == "" || len(doc.Security) == 0 {
		t.Fatalf("the document has no GetStatus operation or no security requirement")
	}
	var header, prefix string
	for name := range doc.Security[0] {
		s := doc.SecurityDefinitions[name]
		if s.Type != "apiKey" || s.In != "header" {
			t.Fatalf("security scheme %s: %+v", name, s)
		}
		header, prefix = s.Name, "Bearer "
	}
	req, _ := http.NewRequest(method, e.URL+path, nil)
	req.Header.Set(header, prefix+e.Operator)
	got, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	code, raw := status(t, got)
	if code != 200 || !strings.Contains(raw, `"caller"`) {
		t.Fatalf("%s %s with the document's scheme: %d %s", method, path, code, raw)
	}
}
