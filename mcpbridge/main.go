package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/buildinfo"
	"github.com/termd/termd/internal/entry"
)

// Main is termd-mcp: it parses flags, serves, and returns the exit code.
// Logs go to stderr only (stdout carries the stdio protocol).
func Main(args []string, stderr io.Writer) int {
	tuneRuntime()
	return entry.Run(NewCommand(stderr), args, stderr)
}

// gcPercent is termd-mcp's GOGC unless the environment sets one. The MCP
// SDK allocates a 32 KiB decoder buffer for each JSON value it decodes,
// several per request, so at Go's default of 100 a bridge with its ~2 MB
// live heap collected every two or three plan+execute pairs. Measured side
// by side over streamable HTTP, 200 cut the bridge's CPU per pair by 9-23%
// for 2.5 MB more peak RSS (400 cut about as much for 9.7 MB more).
const gcPercent = 200

// tuneRuntime sets the garbage collector as above and, unless the profiler
// is asked for (TERMD_DEBUG_PPROF), turns off the sampling of allocations
// for memory profiles, which nothing reads then.
func tuneRuntime() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("TERMD_DEBUG_PPROF") == "" {
		runtime.MemProfileRate = 0
	}
}

// flags are termd-mcp's command-line settings.
type flags struct {
	socket, httpAddr, tokenFile, tlsCert, tlsKey, origins string
	maxSessions                                           int
	verbose                                               bool
}

// NewCommand is termd-mcp's command line.
func NewCommand(stderr io.Writer) *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "termd-mcp",
		Short: "termd-mcp: termd's MCP server (stdio, or streamable HTTP)",
		Long: `termd-mcp is termd's MCP bridge: an MCP server over stdio (one process per MCP
client, exiting when stdin closes) or streamable HTTP, talking to termd through its
unix socket. It holds no privilege of its own.

  termd-mcp [--socket PATH]                              stdio
  termd-mcp --http 127.0.0.1:PORT --token-file FILE      streamable HTTP`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return serve(&f, stderr) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.socket, "socket", "", "termd's socket (default $TERMD_SOCKET, else the per-user or system socket)")
	fl.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP on this loopback HOST:PORT instead of stdio")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token HTTP clients must send (at least 32 random bytes; required with --http)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM) for --http; required to bind a non-loopback address")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS private key (PEM) for --http")
	fl.StringVar(&f.origins, "allow-origin", "", "comma-separated browser origins allowed to call over HTTP (default: none)")
	fl.IntVar(&f.maxSessions, "max-sessions", 8, "daemon sessions this bridge holds for its MCP clients, one each (at the cap an idle one is closed; never shared)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log debug detail to stderr")
	return entry.Prepare(cmd, buildinfo.String())
}

func serve(f *flags, stderr io.Writer) error {
	level := slog.LevelInfo
	if f.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if addr := os.Getenv("TERMD_DEBUG_PPROF"); addr != "" {
		startPprof(addr, log)
	}

	if (f.tlsCert == "") != (f.tlsKey == "") {
		return entry.UsageError(errors.New("--tls-cert and --tls-key go together"))
	}
	var token string
	if f.httpAddr != "" {
		var err error
		if token, err = ReadToken(f.tokenFile); err != nil {
			return entry.UsageError(err)
		}
		if err := CheckListen(f.httpAddr, f.tlsCert != ""); err != nil {
			return entry.UsageError(err)
		}
	} else if f.tokenFile != "" || f.tlsCert != "" {
		return entry.UsageError(errors.New("--token-file and --tls-* only apply with --http"))
	}

	c, err := client.Dial(f.socket, client.Options{Via: "mcp"})
	if err != nil {
		return err
	}
	defer c.Close()
	b := New(Options{Client: c, Logger: log, Version: buildinfo.Version, MaxSessions: f.maxSessions})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if f.httpAddr == "" {
		// stdio: serve until stdin closes. Executions keep running in the
		// daemon; this process only drops its own state.
		if err := b.ServeStdio(ctx); err != nil && ctx.Err() == nil && !isEOF(err) {
			return fmt.Errorf("stdio session ended: %w", err)
		}
		return nil
	}

	var allowed []string
	for _, o := range strings.Split(f.origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, strings.TrimSuffix(o, "/"))
		}
	}
	h, err := b.HTTPHandler(HTTPOptions{Token: token, AllowedOrigins: allowed})
	if err != nil {
		return entry.UsageError(err)
	}
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving MCP over streamable HTTP", "url", entry.URL(ln, f.tlsCert != "")+"/", "socket", c.Socket)
	if err := entry.Serve(ctx, srv, ln, f.tlsCert, f.tlsKey); err != nil {
		return fmt.Errorf("http server stopped: %w", err)
	}
	return nil
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "closed")
}
