// Command termd-gateway serves termd's REST API, event streams (SSE) and the
// web console over HTTP, relaying every call to the daemon's unix socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/termd/termd/gateway"
	"github.com/termd/termd/internal/loopback"
	"github.com/termd/termd/internal/wire"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "termd-gateway:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		socket    = flag.String("socket", wire.DefaultSocket(), "termd's unix socket")
		listen    = flag.String("listen", "127.0.0.1:8765", "address to serve on (loopback unless TLS is configured)")
		tokenFile = flag.String("token-file", "", "operator bearer token file (created with a new token, mode 0600, when missing; default "+gateway.DefaultTokenFile()+" unless --config lists tokens)")
		cfgPath   = flag.String("config", "", "gateway config file (YAML: tokens with roles, allowed hosts, limits)")
		tlsCert   = flag.String("tls-cert", "", "TLS certificate (PEM); required to listen on a non-loopback address")
		tlsKey    = flag.String("tls-key", "", "TLS private key (PEM)")
		heartbeat = flag.Duration("heartbeat", 15*time.Second, "interval of SSE keepalive comments")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	fc := &gateway.FileConfig{}
	if *cfgPath != "" {
		var err error
		if fc, err = gateway.LoadFileConfig(*cfgPath); err != nil {
			return err
		}
	}
	if *tlsCert == "" {
		*tlsCert, *tlsKey = fc.TLSCert, fc.TLSKey
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	useTLS := *tlsCert != ""
	if loop, _ := loopback.Listen(*listen); !loop && !useTLS {
		return fmt.Errorf("refusing to listen on %s without TLS: bind a loopback address (127.0.0.1:PORT) or give --tls-cert and --tls-key", *listen)
	}

	tokens, err := fc.ConfigTokens()
	if err != nil {
		return err
	}
	if *tokenFile != "" || len(tokens) == 0 {
		path := *tokenFile
		if path == "" {
			path = gateway.DefaultTokenFile()
		}
		v, created, err := gateway.LoadOrCreateTokenFile(path)
		if err != nil {
			return err
		}
		if created {
			log.Info("created a new bearer token", "file", path)
		}
		tokens = append(tokens, gateway.Token{Name: "console", Role: termdv1.Role_ROLE_OPERATOR, Value: v})
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hb := *heartbeat
	if fc.HeartbeatSeconds > 0 && !flagSet("heartbeat") {
		hb = time.Duration(fc.HeartbeatSeconds) * time.Second
	}
	g, err := gateway.New(ctx, gateway.Options{
		Socket:         *socket,
		Listen:         ln.Addr().String(),
		TLS:            useTLS,
		Tokens:         tokens,
		AllowedHosts:   fc.AllowedHosts,
		AllowedOrigins: fc.AllowedOrigins,
		RatePerSecond:  fc.RateLimit.PerSecond,
		RateBurst:      fc.RateLimit.Burst,
		BodyLimit:      fc.BodyLimitBytes,
		Heartbeat:      hb,
		Logger:         log,
	})
	if err != nil {
		ln.Close()
		return err
	}
	defer g.Close()

	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Unary responses are bounded by this; the SSE handler lifts it for its own stream.
		WriteTimeout:   5 * time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		BaseContext:    func(net.Listener) context.Context { return ctx },
	}
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	log.Info("termd-gateway listening", "url", scheme+"://"+ln.Addr().String(), "socket", *socket, "tokens", len(tokens))
	errc := make(chan error, 1)
	go func() {
		if useTLS {
			errc <- srv.ServeTLS(ln, *tlsCert, *tlsKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
