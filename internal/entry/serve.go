package entry

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Serve serves srv on ln, with TLS when certFile is set, until ctx ends;
// then it shuts srv down, giving open requests five seconds. It returns the
// server's error if it stops by itself.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, certFile, keyFile string) error {
	errc := make(chan error, 1)
	go func() {
		if certFile != "" {
			errc <- srv.ServeTLS(ln, certFile, keyFile)
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

// URL is the address a server on ln is reached at, for its start-up log line.
func URL(ln net.Listener, tls bool) string {
	if tls {
		return "https://" + ln.Addr().String()
	}
	return "http://" + ln.Addr().String()
}
