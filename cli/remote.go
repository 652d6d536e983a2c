package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
)

// remote is a termd on another host, reached over its mutual-TLS listener
// (listen_tls) instead of the local unix socket.
type remote struct {
	addr string
	tls  client.TLS
}

func (r *remote) flags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&r.addr, "daemon", os.Getenv("TERMD_ADDR"), "a termd on another host: tls://HOST:PORT, its listen_tls address (env TERMD_ADDR); needs --tls-cert, --tls-key, --tls-ca. Empty: the unix socket")
	pf.StringVar(&r.tls.CertFile, "tls-cert", os.Getenv("TERMD_TLS_CERT"), "with --daemon: this client's certificate (PEM), mapped by that termd's listen_tls.clients (env TERMD_TLS_CERT)")
	pf.StringVar(&r.tls.KeyFile, "tls-key", os.Getenv("TERMD_TLS_KEY"), "with --daemon: the private key of --tls-cert (env TERMD_TLS_KEY)")
	pf.StringVar(&r.tls.CAFile, "tls-ca", os.Getenv("TERMD_TLS_CA"), "with --daemon: the CA certificate that signed termd's server certificate (env TERMD_TLS_CA)")
	pf.StringVar(&r.tls.ServerName, "tls-server-name", os.Getenv("TERMD_TLS_SERVER_NAME"), "with --daemon: the name termd's server certificate carries, when it is not the host of --daemon (env TERMD_TLS_SERVER_NAME)")
}

// dial connects to --daemon when given, else to the unix socket.
func (r *remote) dial(socket string, o client.Options) (*client.Client, error) {
	if r.addr == "" {
		return client.Dial(socket, o)
	}
	t := r.tls
	o.TLS = &t
	return client.Dial(r.addr, o)
}
