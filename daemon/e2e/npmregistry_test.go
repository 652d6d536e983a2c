package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// npmRegistry is a tiny npm registry serving one package, leftpad-mini
// 1.0.0, to clients that reach it as http://HOST:PORT/ (the name the
// tarball URLs use). It counts the requests it served.
type npmRegistry struct {
	Addr     string // 127.0.0.1:PORT
	Port     string
	mu       sync.Mutex
	requests []string
}

func startNPMRegistry(t *testing.T, host string) *npmRegistry {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &npmRegistry{Addr: ln.Addr().String()}
	_, r.Port, _ = net.SplitHostPort(r.Addr)
	tgz := npmTarball(t, "leftpad-mini", "1.0.0", "module.exports = (s, n) => String(s).padStart(n);\n")
	sha1sum := sha1.Sum(tgz)
	sha512sum := sha512.Sum512(tgz)
	base := "http://" + host + ":" + r.Port
	packument, _ := json.Marshal(map[string]any{
		"name": "leftpad-mini", "dist-tags": map[string]string{"latest": "1.0.0"},
		"versions": map[string]any{"1.0.0": map[string]any{
			"name": "leftpad-mini", "version": "1.0.0",
			"dist": map[string]string{"tarball": base + "/leftpad-mini/-/leftpad-mini-1.0.0.tgz", "shasum": hex.EncodeToString(sha1sum[:]), "integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:])},
		}},
	})
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		switch req.URL.Path {
		case "/leftpad-mini":
			w.Header().Set("Content-Type", "application/json")
			w.Write(packument)
		case "/leftpad-mini/-/leftpad-mini-1.0.0.tgz":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(tgz)
		default:
			http.NotFound(w, req)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

// Requests are the requests served so far ("GET /path").
func (r *npmRegistry) Requests() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.requests, ", ")
}

// npmTarball is a package tarball: package/package.json and package/index.js.
func npmTarball(t *testing.T, name, version, index string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	pj, _ := json.Marshal(map[string]string{"name": name, "version": version, "main": "index.js"})
	for _, f := range []struct {
		name string
		body []byte
	}{{"package/package.json", pj}, {"package/index.js", []byte(index)}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(1700000000, 0)}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.body)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}
