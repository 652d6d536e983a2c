//go:build !linux

package client

import (
	"context"
	"net"
	"time"
)

// waitConnect tries again a little later: a full queue of connections
// waiting to be accepted refuses a connect at once.
func waitConnect(ctx context.Context, path string) (net.Conn, error) {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
