package broker

import (
	"github.com/termd/termd/daemon/sandbox"
)

// SandboxMode is the configured sandbox mode, or this host's default
// (executions.Launches.Mode).
func (b *Broker) SandboxMode() sandbox.Mode { return b.launches.Mode() }

// SandboxLevel is how much of every profile this daemon enforces.
func (b *Broker) SandboxLevel() sandbox.Level { return b.launches.Level() }

// sandboxEnforced: profiles are fully enforced, so the policy may let
// confined project code run without approval.
func (b *Broker) sandboxEnforced() bool { return b.SandboxLevel() == sandbox.LevelFull }

// sandboxEnforcer names what confines executions, for the policy's reasons.
func (b *Broker) sandboxEnforcer() string { return b.launches.Enforcer() }

// releaseSandbox closes what the launcher did not take, stops the egress
// proxy, lets go of the network namespace and removes the execution's
// private temporary directory (everything the command left in it).
func (e *execRec) releaseSandbox() {
	e.Launch.Close()
	e.egress.Stop()
	e.netns.Release()
	e.netns = nil
	e.RemoveTmp()
}
