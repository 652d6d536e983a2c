package gateway

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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/termd/termd/internal/buildinfo"
	"github.com/termd/termd/internal/entry"
	"github.com/termd/termd/internal/loopback"
	"github.com/termd/termd/internal/wire"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Main is termd-gateway: it parses the command line, serves until SIGTERM or
// SIGINT, and returns the exit code.
func Main(args []string, stderr io.Writer) int {
	return entry.Run(NewCommand(stderr), args, stderr)
}

// flags are termd-gateway's command-line settings.
type flags struct {
	socket, listen, tokenFile, cfgPath, tlsCert, tlsKey string
	heartbeat                                           time.Duration
	// The fleet: --daemon NAME=TARGET (repeated), --fleet FILE, the
	// gateway's client certificate for TLS targets, the default host.
	daemons                         []string
	fleetFile, defaultHost          string
	clientCert, clientKey, clientCA string
}

// NewCommand is termd-gateway's command line. Logs go to stderr.
func NewCommand(stderr io.Writer) *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "termd-gateway",
		Short: "termd-gateway: termd's REST API, event streams (SSE) and web console over HTTP",
		Long: `termd-gateway serves termd's REST API, its event streams (SSE) and the web console
over HTTP, relaying every call to the daemon's unix socket. Every API route needs a
bearer token; the role a token grants is the most its holder can do.

One gateway can serve several daemons (a fleet): name each with --daemon NAME=TARGET
(a unix socket path, or HOST:PORT of termd's mutual-TLS listener with --client-cert,
--client-key and --client-ca) or list them in a --fleet file. Each host's routes are
/v1/hosts/NAME/...; /v1/hosts lists the hosts with their state, /v1/fleet/plans is the
approval queue of every host and /v1/fleet/events their merged events. Unprefixed /v1/
routes go to the default host (--default-host, else the first).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd, &f, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.socket, "socket", wire.DefaultSocket(), "termd's unix socket")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8765", "address to serve on (loopback unless TLS is configured)")
	fl.StringVar(&f.tokenFile, "token-file", "", "operator bearer token file (created with a new token, mode 0600, when missing; default "+DefaultTokenFile()+" unless --config lists tokens)")
	fl.StringVar(&f.cfgPath, "config", "", "gateway config file (YAML: tokens with roles, allowed hosts, limits)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM); required to listen on a non-loopback address")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS private key (PEM)")
	fl.DurationVar(&f.heartbeat, "heartbeat", 15*time.Second, "interval of SSE keepalive comments")
	fl.StringArrayVar(&f.daemons, "daemon", nil, "a daemon to serve, NAME=TARGET (repeatable): TARGET is a unix socket path or HOST:PORT of termd's mutual-TLS listener; replaces --socket")
	fl.StringVar(&f.fleetFile, "fleet", "", "fleet file (YAML: hosts with name, address and TLS files); with or instead of --daemon")
	fl.StringVar(&f.defaultHost, "default-host", "", "the host unprefixed /v1/ routes go to (default: the fleet file's default_host, else the first host)")
	fl.StringVar(&f.clientCert, "client-cert", "", "the gateway's client certificate (PEM) for HOST:PORT daemons")
	fl.StringVar(&f.clientKey, "client-key", "", "the key of --client-cert (PEM)")
	fl.StringVar(&f.clientCA, "client-ca", "", "the CA (PEM) that signed the daemons' server certificates")
	return entry.Prepare(cmd, buildinfo.String())
}

func serve(cmd *cobra.Command, f *flags, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, nil))

	fc := &FileConfig{}
	if f.cfgPath != "" {
		var err error
		if fc, err = LoadFileConfig(f.cfgPath); err != nil {
			return err
		}
	}
	if f.tlsCert == "" {
		f.tlsCert, f.tlsKey = fc.TLSCert, fc.TLSKey
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	useTLS := f.tlsCert != ""
	if loop, _ := loopback.Listen(f.listen); !loop && !useTLS {
		return fmt.Errorf("refusing to listen on %s without TLS: bind a loopback address (127.0.0.1:PORT) or give --tls-cert and --tls-key", f.listen)
	}

	tokens, err := fc.ConfigTokens()
	if err != nil {
		return err
	}
	if f.tokenFile != "" || len(tokens) == 0 {
		path := f.tokenFile
		if path == "" {
			path = DefaultTokenFile()
		}
		v, created, err := LoadOrCreateTokenFile(path)
		if err != nil {
			return err
		}
		if created {
			log.Info("created a new bearer token", "file", path)
		}
		tokens = append(tokens, Token{Name: "console", Role: termdv1.Role_ROLE_OPERATOR, Value: v})
	}

	hosts, defHost, err := f.fleet(cmd)
	if err != nil {
		return err
	}
	sockets := []string{f.socket}
	if len(hosts) > 0 {
		sockets = nil
		for _, h := range hosts {
			if !h.IsTCP() {
				sockets = append(sockets, h.Target)
			}
		}
	}
	for _, sock := range sockets {
		if err := checkIdentity(tokens, sock, os.Geteuid()); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hb := f.heartbeat
	if fc.HeartbeatSeconds > 0 && !cmd.Flags().Changed("heartbeat") {
		hb = time.Duration(fc.HeartbeatSeconds) * time.Second
	}
	g, err := New(ctx, Options{
		Socket:         f.socket,
		Hosts:          hosts,
		DefaultHost:    defHost,
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
	if len(hosts) == 0 {
		log.Info("termd-gateway listening", "url", entry.URL(ln, useTLS), "socket", f.socket, "tokens", len(tokens))
	} else {
		log.Info("termd-gateway listening", "url", entry.URL(ln, useTLS), "hosts", strings.Join(g.hostNames(), ","), "default_host", g.def.Name, "tokens", len(tokens))
	}
	return entry.Serve(ctx, srv, ln, f.tlsCert, f.tlsKey)
}

// fleet reads --daemon, --fleet and the client TLS flags into the host
// list (empty: serve --socket alone) and the default host.
func (f *flags) fleet(cmd *cobra.Command) ([]Host, string, error) {
	if len(f.daemons) == 0 && f.fleetFile == "" {
		for _, n := range []string{"default-host", "client-cert", "client-key", "client-ca"} {
			if cmd.Flags().Changed(n) {
				return nil, "", fmt.Errorf("--%s applies to a fleet: name the daemons with --daemon NAME=TARGET or --fleet FILE", n)
			}
		}
		return nil, "", nil
	}
	if cmd.Flags().Changed("socket") {
		return nil, "", errors.New("--socket and --daemon/--fleet do not go together: name the socket's daemon with --daemon NAME=" + f.socket)
	}
	var daemons []Host
	for _, d := range f.daemons {
		h, err := ParseDaemonFlag(d)
		if err != nil {
			return nil, "", err
		}
		daemons = append(daemons, h)
	}
	var ff *FleetFile
	def := f.defaultHost
	if f.fleetFile != "" {
		var err error
		if ff, err = LoadFleetFile(f.fleetFile); err != nil {
			return nil, "", err
		}
		if def == "" {
			def = ff.DefaultHost
		}
	}
	hosts, err := FleetHosts(daemons, ff, HostTLS{Cert: f.clientCert, Key: f.clientKey, CA: f.clientCA})
	if err != nil {
		return nil, "", err
	}
	return hosts, def, nil
}

// checkIdentity refuses to serve a token weaker than operator while the
// gateway runs as root or as termd's own uid (the socket's owner): termd runs
// a plan as its requester's uid, and through the gateway that is the
// gateway's uid, so an agent or viewer token would act with root's (or
// termd's) file access.
func checkIdentity(tokens []Token, socket string, euid int) error {
	var weak *Token
	for i := range tokens {
		if tokens[i].Role != termdv1.Role_ROLE_OPERATOR {
			weak = &tokens[i]
			break
		}
	}
	if weak == nil {
		return nil
	}
	who := ""
	if euid == 0 {
		who = "root"
	} else if st, err := os.Stat(socket); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == euid {
			who = fmt.Sprintf("termd's own uid %d (the owner of %s)", euid, socket)
		}
	}
	if who == "" {
		return nil
	}
	role := strings.ToLower(strings.TrimPrefix(weak.Role.String(), "ROLE_"))
	return fmt.Errorf("refusing to start as %s with token %q of role %s: commands planned through the gateway run as the gateway's uid, so that token would act as %s; run termd-gateway as its own unprivileged user (the installed termd-gateway.service runs it as termd-gateway, with a role in termd's config), or give it operator tokens only", who, weak.Name, role, who)
}
