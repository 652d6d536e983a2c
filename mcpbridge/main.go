package mcpbridge

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/buildinfo"
)

// Main is termd-mcp: it parses flags, serves, and returns the exit code.
// Logs go to stderr only (stdout carries the stdio protocol).
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("termd-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "termd's socket (default $TERMD_SOCKET, else the per-user or system socket)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on this loopback HOST:PORT instead of stdio")
	tokenFile := fs.String("token-file", "", "file holding the bearer token HTTP clients must send (at least 32 random bytes; required with --http)")
	tlsCert := fs.String("tls-cert", "", "TLS certificate (PEM) for --http; required to bind a non-loopback address")
	tlsKey := fs.String("tls-key", "", "TLS private key (PEM) for --http")
	origins := fs.String("allow-origin", "", "comma-separated browser origins allowed to call over HTTP (default: none)")
	maxSessions := fs.Int("max-sessions", 4, "daemon sessions this bridge opens for its MCP clients at most (beyond, they are shared)")
	verbose := fs.Bool("v", false, "log debug detail to stderr")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: termd-mcp [--socket PATH]                       (stdio, one process per MCP client)\n"+
			"       termd-mcp --http 127.0.0.1:PORT --token-file FILE   (streamable HTTP)\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *version {
		fmt.Fprintln(os.Stdout, "termd-mcp", buildinfo.Version)
		return 0
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	if (*tlsCert == "") != (*tlsKey == "") {
		fmt.Fprintln(stderr, "termd-mcp: --tls-cert and --tls-key go together")
		return 2
	}
	var token string
	if *httpAddr != "" {
		var err error
		if token, err = ReadToken(*tokenFile); err != nil {
			fmt.Fprintln(stderr, "termd-mcp:", err)
			return 2
		}
		if err := CheckListen(*httpAddr, *tlsCert != ""); err != nil {
			fmt.Fprintln(stderr, "termd-mcp:", err)
			return 2
		}
	} else if *tokenFile != "" || *tlsCert != "" {
		fmt.Fprintln(stderr, "termd-mcp: --token-file and --tls-* only apply with --http")
		return 2
	}

	c, err := client.Dial(*socket, client.Options{Via: "mcp"})
	if err != nil {
		fmt.Fprintln(stderr, "termd-mcp:", err)
		return 1
	}
	defer c.Close()
	b := New(Options{Client: c, Logger: log, Version: buildinfo.Version, MaxSessions: *maxSessions})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *httpAddr == "" {
		// stdio: serve until stdin closes. Executions keep running in the
		// daemon; this process only drops its own state.
		if err := b.ServeStdio(ctx); err != nil && ctx.Err() == nil && !isEOF(err) {
			log.Error("stdio session ended", "err", err)
			return 1
		}
		return 0
	}

	var allowed []string
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, strings.TrimSuffix(o, "/"))
		}
	}
	h, err := b.HTTPHandler(HTTPOptions{Token: token, AllowedOrigins: allowed})
	if err != nil {
		fmt.Fprintln(stderr, "termd-mcp:", err)
		return 2
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fmt.Fprintln(stderr, "termd-mcp:", err)
		return 1
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if *tlsCert != "" {
		scheme = "https"
	}
	log.Info("serving MCP over streamable HTTP", "url", scheme+"://"+ln.Addr().String()+"/", "socket", c.Socket)
	errc := make(chan error, 1)
	go func() {
		if *tlsCert != "" {
			errc <- srv.ServeTLS(ln, *tlsCert, *tlsKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		log.Error("http server stopped", "err", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "closed")
}
