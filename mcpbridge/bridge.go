// Package mcpbridge serves termd to MCP clients: tools, prompts and
// resources that map onto the daemon's gRPC API through package client.
// It holds no privilege and runs nothing itself; every decision is the
// daemon's, made for the uid the bridge runs as. There is deliberately no
// approve tool: approval comes only from an operator (termctl or the console).
package mcpbridge

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/client"
)

// Instructions tell an agent the flow, in the server info every client sees.
const Instructions = "termd runs commands for you under policy: call terminal_run with the argv; it is planned and, if the policy allows it, run in the same call. If it needs approval, the result gives its plan_id: a person approves it (`termctl approve <plan_id>` or the console; you cannot), then call terminal_execute with that plan_id. terminal_plan plans without running (to review first, or for a tty). " +
	"A command that outlasts wait_seconds comes back as `running` with an execution_id: poll terminal_status and terminal_output, and read the signed receipt with terminal_receipt. " +
	"For long work, terminal_execute with background: true returns at once; terminal_list shows what still runs, terminal_output reads new output from an offset, and subscribing to the execution's resource_uri notifies you when it ends. " +
	"Interactive programs (a REPL, a [Y/n] prompt, less, git add -p) need a terminal: terminal_plan with tty, then terminal_send types into it and returns the rendered screen once the program waits for input again; terminal_screen reads it. " +
	"There is no shell: pipes, redirections (`>`), `&&` and variables do not exist, so send one program and its arguments; to create or rewrite a file, use your own file-editing tools (or `sed -i` / `cp` on existing files) rather than `echo > file`. " +
	"cwd may be relative to the workspace root. " +
	"To get oriented in a project, terminal_recipes lists ready-made read-only recipes (repository state, test discovery, log triage) and terminal_recipe_run runs one in a directory. " +
	"terminal_history searches the receipts of what you ran before (commands, reasons, redacted output) for a literal phrase."

// Options configure a Bridge.
type Options struct {
	// Client reaches the daemon (dial it with client.Options{Via: "mcp"}).
	Client *client.Client
	// Logger receives diagnostics; it must not write to stdout under stdio.
	Logger *slog.Logger
	// Version is reported in the server info.
	Version string
	// MaxSessions caps the daemon sessions this bridge holds for its MCP
	// clients (HTTP serves many), one per client: at the cap an idle one is
	// closed to make room, else the new client is refused. Default 8.
	MaxSessions int
}

// Bridge is one MCP server backed by one daemon connection.
type Bridge struct {
	c        *client.Client
	log      *slog.Logger
	sdkLog   *slog.Logger // for the MCP SDK: its per-request Info is Debug here
	server   *mcp.Server
	sessions *sessionPool
	ends     endWatch // executions whose end a client subscribed to

	mu         sync.Mutex
	consoleURL string
	consoleAt  time.Time
	roots      []string // workspace roots, from the daemon's status
}

// New builds the MCP server with every tool, prompt and resource.
func New(o Options) *Bridge {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 8
	}
	b := &Bridge{
		c:      o.Client,
		log:    o.Logger,
		sdkLog: slog.New(quieter{o.Logger.Handler()}),
	}
	b.sessions = newSessionPool(o.Client, o.MaxSessions)
	b.server = mcp.NewServer(&mcp.Implementation{
		Name:    "termd-mcp",
		Title:   "termd command broker",
		Version: o.Version,
	}, &mcp.ServerOptions{
		Instructions: Instructions,
		Logger:       b.sdkLog,
		// Logging over MCP is deprecated (2026-07-28); the bridge logs to stderr.
		Capabilities: &mcp.ServerCapabilities{},
		PageSize:     100,
		SchemaCache:  mcp.NewSchemaCache(),
		// execution://ID resources: a subscriber is notified when it ends.
		SubscribeHandler:   b.subscribe,
		UnsubscribeHandler: b.unsubscribe,
		// A stateful client's daemon session is released when its MCP
		// session ends (DELETE, idle timeout, closed stream).
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			ss := req.Session
			if ss == nil || ss.ID() == "" {
				return // stdio: ServeStdio releases at exit
			}
			go func() {
				_ = ss.Wait()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if b.sessions.release(ctx, ss.ID()) {
					b.log.Debug("released the daemon session of a departed client", "mcp_session", ss.ID())
				}
			}()
		},
	})
	b.server.AddReceivingMiddleware(withFileSchemas)
	b.addTools()
	b.addPrompts()
	b.addResources()
	return b
}

// ServeStdio serves one MCP client over stdin/stdout until stdin closes or
// ctx ends. Running executions are left to the daemon: they keep their
// sessions until those expire.
func (b *Bridge) ServeStdio(ctx context.Context) error {
	err := b.server.Run(ctx, cancelAware{&mcp.StdioTransport{}})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if n := b.sessions.closeIdle(cctx); n > 0 {
		b.log.Debug("closed idle daemon sessions", "count", n)
	}
	return err
}

// consoleURLFor returns the console's approval page for a plan, or "" when
// the daemon has no console URL configured.
func (b *Bridge) consoleURLFor(ctx context.Context, planID string) string {
	b.mu.Lock()
	u, at := b.consoleURL, b.consoleAt
	b.mu.Unlock()
	if at.IsZero() || (u == "" && time.Since(at) > 30*time.Second) {
		st, err := b.c.Status(ctx)
		if err == nil {
			u = st.GetConsoleUrl()
			b.mu.Lock()
			b.consoleURL, b.consoleAt = u, time.Now()
			b.mu.Unlock()
		}
	}
	if u == "" {
		return ""
	}
	for len(u) > 0 && u[len(u)-1] == '/' {
		u = u[:len(u)-1]
	}
	return u + "/plans/" + planID
}

// quieter passes the MCP SDK's records on with Info (it logs every HTTP
// request and session at Info) lowered to Debug: seen with --verbose, not
// written (or even formatted) per request otherwise.
type quieter struct{ h slog.Handler }

func (q quieter) Enabled(ctx context.Context, l slog.Level) bool {
	return q.h.Enabled(ctx, lowered(l))
}

func (q quieter) Handle(ctx context.Context, r slog.Record) error {
	r.Level = lowered(r.Level)
	return q.h.Handle(ctx, r)
}

func (q quieter) WithAttrs(as []slog.Attr) slog.Handler { return quieter{q.h.WithAttrs(as)} }
func (q quieter) WithGroup(n string) slog.Handler       { return quieter{q.h.WithGroup(n)} }

func lowered(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}
