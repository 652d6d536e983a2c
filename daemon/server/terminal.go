package server

import (
	"github.com/termd/termd/daemon/broker"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// terminalSvc is the TerminalService: a thin translation to the broker's
// terminal hubs (daemon/broker/terminal.go).
type terminalSvc struct {
	termdv1.UnimplementedTerminalServiceServer
	b *broker.Broker
}
