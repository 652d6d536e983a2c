package harness

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A real OpenTelemetry Collector for tests: tools/otelcol is a tiny main
// over the collector's own Go modules (OTLP receiver, file exporter), in a
// module of its own so the product's go.mod does not pull the collector in.
// It is built once per machine and kept in the user's cache directory under
// a name keyed by the hash of its go.mod, go.sum and main.go: a cold build
// takes minutes, a cached one nothing.

var (
	otelcolOnce sync.Once
	otelcolBin  string
	otelcolErr  error
)

// OtelcolBin returns the test collector's binary, building it when its
// sources changed. When it cannot be built (no module cache and no module
// proxy), the test is skipped, or fails under TERMD_TEST_REQUIRE_ALL.
func OtelcolBin(t testing.TB) string {
	t.Helper()
	otelcolOnce.Do(func() { otelcolBin, otelcolErr = BuildOtelcol() })
	if otelcolErr != nil {
		Missing(t, "the test OpenTelemetry Collector (tools/otelcol) cannot be built: %v", otelcolErr)
	}
	return otelcolBin
}

// BuildOtelcol builds the test collector unless the cached binary is
// current, and returns its path. scripts/ci-deps.sh runs it (through
// internal/harness/buildotelcol) before the tests, so `make test` does not
// spend the cold build inside a test's time limit.
func BuildOtelcol() (string, error) {
	src := filepath.Join(repoRoot(), "tools", "otelcol")
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	// make test and scripts/ci-deps.sh keep it in the build directory
	// (TERMD_OTELCOL_CACHE=bin/otelcol); elsewhere in the user's cache.
	cache := os.Getenv("TERMD_OTELCOL_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		cache = filepath.Join(dir, "termd-test")
	}
	dir := filepath.Join(cache, "otelcol-"+hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(dir, "otelcol")
	if st, err := os.Stat(bin); err == nil && st.Mode()&0o111 != 0 {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built to a temporary name and renamed: parallel test processes (go
	// test runs packages at once) never run a half-written binary.
	tmp := filepath.Join(dir, fmt.Sprintf(".otelcol-%d", os.Getpid()))
	defer os.Remove(tmp)
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmp, ".")
	cmd.Dir = src
	// Its own module, read-only against its committed go.sum (the Go
	// default), outside any go.work.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build in tools/otelcol: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "harness: built the test OpenTelemetry Collector in %s (cached as %s)\n", time.Since(start).Round(time.Second), bin)
	return bin, nil
}

// Collector is a running test collector: OTLP/gRPC and OTLP/HTTP on
// loopback, every log record written to a JSON file per run.
type Collector struct {
	t        testing.TB
	Dir      string
	GRPCAddr string // 127.0.0.1:PORT
	HTTPAddr string
	runs     int
	cmd      *exec.Cmd
	done     chan struct{}
}

// StartCollector starts a collector on two free loopback ports.
func StartCollector(t testing.TB) *Collector {
	t.Helper()
	return StartCollectorOn(t, "127.0.0.1")
}

// StartCollectorOn starts a collector on two free ports of addr; 0.0.0.0
// (every address) lets hosts in network namespaces reach it over their
// links, at their NetHost.RootIP (see Endpoint).
func StartCollectorOn(t testing.TB, addr string) *Collector {
	t.Helper()
	bin := OtelcolBin(t)
	c := &Collector{t: t, Dir: t.TempDir(), GRPCAddr: freePort(t, addr), HTTPAddr: freePort(t, addr)}
	c.start(bin)
	t.Cleanup(func() { c.Kill() })
	return c
}

// GRPCEndpoint is the OTLP/gRPC endpoint URL at ip (the collector listening
// on 0.0.0.0): http://IP:PORT.
func (c *Collector) GRPCEndpoint(ip string) string {
	_, port, _ := net.SplitHostPort(c.GRPCAddr)
	return "http://" + net.JoinHostPort(ip, port)
}

func freePort(t testing.TB, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// As asked: 0.0.0.0 stays 0.0.0.0 (Go would print [::] for it).
	return net.JoinHostPort(addr, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
}

func (c *Collector) start(bin string) {
	t := c.t
	t.Helper()
	c.runs++
	// rotation makes the file exporter write each request straight to the
	// file (without it, it buffers for a second after acknowledging, and a
	// collector killed with SIGKILL loses what it acknowledged). Its own
	// telemetry is off: no port 8888 shared with other tests.
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    rotation:
      max_megabytes: 1024
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [file]
`, c.GRPCAddr, c.HTTPAddr, filepath.Join(c.Dir, fmt.Sprintf("logs-%d.json", c.runs)))
	cfgPath := filepath.Join(c.Dir, fmt.Sprintf("config-%d.yaml", c.runs))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "collector.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config", "file:"+cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.cmd, c.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(c.done) }()
	// Ready when both receivers accept connections.
	deadline := time.Now().Add(60 * time.Second)
	for _, a := range []string{c.GRPCAddr, c.HTTPAddr} {
		for {
			conn, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-c.done:
				t.Fatalf("the collector exited at start: %v\n%s", cmd.ProcessState, c.Log())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the collector did not listen on %s within 60s\n%s", a, c.Log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Kill kills the collector with SIGKILL (no graceful shutdown, no flush).
func (c *Collector) Kill() {
	if c.cmd == nil {
		return
	}
	select {
	case <-c.done:
	default:
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// Restart starts a killed collector again on the same ports, writing to a
// new file.
func (c *Collector) Restart() {
	c.t.Helper()
	c.Kill()
	c.start(OtelcolBin(c.t))
}

// Log is the collector's own log so far.
func (c *Collector) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "collector.log"))
	return string(b)
}

// LogRecord is one record the collector wrote: its resource's and its own
// attributes (string values, ints as decimal strings) and its body.
type LogRecord struct {
	Resource map[string]string
	Attrs    map[string]string
	Body     string
}

// Records reads every log record from every file the collector wrote so
// far (the file exporter's JSON: one OTLP ExportLogsServiceRequest a line).
func (c *Collector) Records() ([]LogRecord, error) {
	files, _ := filepath.Glob(filepath.Join(c.Dir, "logs-*.json"))
	var out []LogRecord
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			recs, err := parseOTLPJSON(line)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, recs...)
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type otlpValue struct {
	StringValue *string `json:"stringValue"`
	IntValue    *string `json:"intValue"` // int64 is a string in OTLP/JSON
}

func (v otlpValue) String() string {
	switch {
	case v.StringValue != nil:
		return *v.StringValue
	case v.IntValue != nil:
		return *v.IntValue
	}
	return ""
}

type otlpKV struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

func kvMap(kvs []otlpKV) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.String()
	}
	return m
}

func parseOTLPJSON(line []byte) ([]LogRecord, error) {
	var req struct {
		ResourceLogs []struct {
			Resource struct {
				Attributes []otlpKV `json:"attributes"`
			} `json:"resource"`
			ScopeLogs []struct {
				LogRecords []struct {
					Attributes []otlpKV  `json:"attributes"`
					Body       otlpValue `json:"body"`
				} `json:"logRecords"`
			} `json:"scopeLogs"`
		} `json:"resourceLogs"`
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, fmt.Errorf("not OTLP/JSON logs: %w (%.200s)", err, strings.TrimSpace(string(line)))
	}
	var out []LogRecord
	for _, rl := range req.ResourceLogs {
		res := kvMap(rl.Resource.Attributes)
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				out = append(out, LogRecord{Resource: res, Attrs: kvMap(lr.Attributes), Body: lr.Body.String()})
			}
		}
	}
	return out, nil
}
