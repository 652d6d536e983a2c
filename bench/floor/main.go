//go:build linux

// Command floor is what termd's MCP plan+execute pair is measured against in
// `make bench` (mcpbridge's TestBenchFloor): the same required parts and
// nothing else. Two processes, as termd-mcp and termd:
//
//	floor broker SOCKET DIR          a gRPC server on a unix socket
//	floor mcp SOCKET ADDR TOKENFILE  a go-sdk streamable-HTTP MCP server
//
// The MCP server's terminal_plan and terminal_execute call the broker over
// gRPC. Plan resolves the program on PATH and keeps the argv; Execute
// appends an intent line to DIR/journal and fdatasyncs it, fork/execs the
// command in the broker's directory with its output captured, and appends
// the receipt (state, exit code, output and its sha256) and fdatasyncs
// again. No policy, sandbox, signature or redaction. A third method, Steps,
// reports the p50 and p90 of the broker's steps (resolve, intent, run,
// receipt, all of execute) over its last 512 executions, for the bench's
// latency table. HTTP requests need the bearer token; 2026-07-28 requests
// are served stateless, initialize and the 2025-11-25 session form
// stateful.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 4 && os.Args[1] == "broker":
		err = broker(os.Args[2], os.Args[3])
	case len(os.Args) == 5 && os.Args[1] == "mcp":
		err = serveMCP(os.Args[2], os.Args[3], os.Args[4])
	default:
		err = errors.New("usage: floor broker SOCKET DIR | floor mcp SOCKET ADDR TOKENFILE")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// The broker's two methods, a hand-written service of protobuf wrappers.
const service = "floor.Broker"

type brokerServer struct {
	dir string

	mu    sync.Mutex
	seq   uint64
	plans map[string]floorPlan
	times [stepsKept][nSteps]time.Duration // the last stepsKept executions' steps (under mu)
	timed int                              // executions timed so far

	jmu     sync.Mutex // one append+fdatasync at a time
	journal *os.File
}

func broker(sock, dir string) error {
	j, err := os.OpenFile(filepath.Join(dir, "journal"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	b := &brokerServer{dir: wd, plans: map[string]floorPlan{}, journal: j}
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		return err
	}
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: service,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Plan", Handler: handler(b.plan)},
			{MethodName: "Execute", Handler: handler(b.execute)},
			{MethodName: "Steps", Handler: handler(b.steps)},
		},
	}, b)
	return s.Serve(l)
}

func handler(f func(string) (string, error)) grpc.MethodHandler {
	return func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var in wrapperspb.StringValue
		if err := dec(&in); err != nil {
			return nil, err
		}
		out, err := f(in.Value)
		if err != nil {
			return nil, err
		}
		return wrapperspb.String(out), nil
	}
}

// floorPlan is a plan's argv and how long making it took.
type floorPlan struct {
	argv []string
	took time.Duration
}

// The broker's steps of one pair, each timed (two clock reads a step).
const (
	stepResolve = iota // plan: split, look the program up on PATH, keep the plan
	stepIntent         // execute: the intent's JSON, append + fdatasync
	stepRun            // execute: fork/exec, the output read, wait
	stepReceipt        // execute: the receipt's JSON and sha256, append + fdatasync
	stepExecute        // execute: all of it, from the call to the answer
	nSteps
)

var stepNames = [nSteps]string{"resolve", "intent", "run", "receipt", "execute"}

const stepsKept = 512

// steps reports each step's p50 and p90 over the last stepsKept
// executions (the Steps method; the bench reads it, the hot path only
// stores five durations).
func (b *brokerServer) steps(string) (string, error) {
	b.mu.Lock()
	kept := b.times[:min(b.timed, stepsKept)]
	col := make([][]time.Duration, nSteps)
	for _, row := range kept {
		for i, d := range row {
			col[i] = append(col[i], d)
		}
	}
	b.mu.Unlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "floor broker steps over the last %d executions\n", len(kept))
	for i, c := range col {
		if len(c) == 0 {
			break
		}
		slices.Sort(c)
		fmt.Fprintf(&sb, "%-10s %v %v\n", stepNames[i], c[(len(c)-1)/2], c[(len(c)-1)*9/10])
	}
	return sb.String(), nil
}

func (b *brokerServer) plan(command string) (string, error) {
	start := time.Now()
	argv := strings.Fields(command)
	if len(argv) == 0 {
		return "", errors.New("no command")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return "", err
	}
	argv[0] = path
	b.mu.Lock()
	b.seq++
	id := "p" + strconv.FormatUint(b.seq, 10)
	b.plans[id] = floorPlan{argv, time.Since(start)}
	b.mu.Unlock()
	return id, nil
}

// durable appends line to the journal and fdatasyncs it.
func (b *brokerServer) durable(line []byte) error {
	b.jmu.Lock()
	defer b.jmu.Unlock()
	if _, err := b.journal.Write(line); err != nil {
		return err
	}
	return syscall.Fdatasync(int(b.journal.Fd()))
}

type receipt struct {
	PlanID       string `json:"plan_id"`
	State        string `json:"state"`
	ExitCode     int    `json:"exit_code"`
	Stdout       string `json:"stdout"`
	StdoutSHA256 string `json:"stdout_sha256"`
	DurationMS   int64  `json:"duration_ms"`
}

func (b *brokerServer) execute(id string) (string, error) {
	t0 := time.Now()
	b.mu.Lock()
	p, ok := b.plans[id]
	delete(b.plans, id)
	b.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("no plan %q", id)
	}
	argv := p.argv
	intent, _ := json.Marshal(struct {
		Intent string   `json:"intent"`
		Argv   []string `json:"argv"`
	}{id, argv})
	if err := b.durable(append(intent, '\n')); err != nil {
		return "", err
	}
	start := time.Now()
	var out bytes.Buffer
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir, c.Stdout = b.dir, &out
	err := c.Run()
	t2 := time.Now()
	r := receipt{PlanID: id, State: "succeeded", ExitCode: c.ProcessState.ExitCode(), DurationMS: time.Since(start).Milliseconds()}
	if err != nil {
		r.State = "failed"
	}
	sum := sha256.Sum256(out.Bytes())
	r.Stdout, r.StdoutSHA256 = out.String(), hex.EncodeToString(sum[:])
	line, _ := json.Marshal(r)
	if err := b.durable(append(line, '\n')); err != nil {
		return "", err
	}
	t3 := time.Now()
	b.mu.Lock()
	b.times[b.timed%stepsKept] = [nSteps]time.Duration{p.took, start.Sub(t0), t2.Sub(start), t3.Sub(t2), t3.Sub(t0)}
	b.timed++
	b.mu.Unlock()
	return string(line), nil
}

type planArgs struct {
	Command   string `json:"command"`
	SessionID string `json:"session_id,omitempty"`
}

type planResult struct {
	PlanID    string `json:"plan_id"`
	SessionID string `json:"session_id"`
	State     string `json:"state"`
}

type executeArgs struct {
	PlanID string `json:"plan_id"`
}

func serveMCP(sock, addr, tokenFile string) error {
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	want := []byte("Bearer " + strings.TrimSpace(string(tok)))
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	call := func(ctx context.Context, method, arg string) (string, error) {
		var out wrapperspb.StringValue
		err := conn.Invoke(ctx, "/"+service+"/"+method, wrapperspb.String(arg), &out)
		return out.Value, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "terminal_plan", Description: "plan a command"}, func(ctx context.Context, _ *mcp.CallToolRequest, in planArgs) (*mcp.CallToolResult, planResult, error) {
		id, err := call(ctx, "Plan", in.Command)
		return nil, planResult{PlanID: id, SessionID: "floor", State: "planned"}, err
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "terminal_execute", Description: "execute a plan"}, func(ctx context.Context, _ *mcp.CallToolRequest, in executeArgs) (*mcp.CallToolResult, receipt, error) {
		var r receipt
		line, err := call(ctx, "Execute", in.PlanID)
		if err == nil {
			err = json.Unmarshal([]byte(line), &r)
		}
		return nil, r, err
	})
	one := func(*http.Request) *mcp.Server { return srv }
	stateless := mcp.NewStreamableHTTPHandler(one, &mcp.StreamableHTTPOptions{Stateless: true})
	stateful := mcp.NewStreamableHTTPHandler(one, nil)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("floor: serving http://%s/\n", l.Addr())
	return http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || r.Header.Get("Mcp-Protocol-Version") != "2026-07-28" {
			// initialize, the 2025-11-25 session form, GET and DELETE
			stateful.ServeHTTP(w, r)
			return
		}
		stateless.ServeHTTP(w, r)
	}))
}
