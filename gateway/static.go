package gateway

import (
	_ "embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/receipt"
	"github.com/termd/termd/web"
)

// receiptSchema is the schema document of one receipt version.
func receiptSchema(version string) []byte { return receipt.Schemas[version] }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func runtimeHTTPStatus(c codes.Code) int { return runtime.HTTPStatusFromCode(c) }

// consoleHandler serves the single-page console. Paths that name a file
// serve it; any other path (e.g. /plans/ID, the approval link the MCP
// bridge hands to a person) serves index.html and the app routes it.
func consoleHandler() http.Handler {
	files, err := fs.Sub(web.Console, "console")
	if err != nil {
		panic(err)
	}
	fileServer := http.FileServerFS(files)
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if p != "" && p != "index.html" {
			if st, err := fs.Stat(files, p); err == nil && !st.IsDir() {
				fileServer.ServeHTTP(w, r)
				return
			}
			if path.Ext(p) != "" && !strings.HasPrefix(p, "plans/") && !strings.HasPrefix(p, "receipts/") && !strings.HasPrefix(p, "sessions/") {
				http.NotFound(w, r)
				return
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(index)
	})
}
