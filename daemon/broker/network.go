package broker

import (
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/netmode"
)

// egressLists are the names of the configured egress allow-lists for the
// policy (policy.Context.EgressLists); nil: none are configured (see
// NETWORK-SEAM.md: the egress proxy hooks in here).
func (b *Broker) egressLists() []string { return b.egressListNames() }

// networkAvailable refuses, before anything is prepared, a plan whose
// network this daemon cannot give.
func (b *Broker) networkAvailable(d policy.Decision) error {
	if m := netmode.Mode(d.Sandbox.NetworkMode); m.IsEgress() {
		return b.egressReady(m)
	}
	return nil
}
