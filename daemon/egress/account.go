package egress

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/termd/termd/receipt"
)

// Bounds on what one execution's account holds (a command that connects to
// ever new names fills them; past them it is only counted).
const (
	MaxDestinations = 256
	MaxRefusals     = 256
)

// The account's summary is the receipt's egress member itself
// (receipt.Egress): one type for what the proxy counted and what the receipt
// records, so neither is copied into the other field by field.

type destKey struct {
	host string
	port uint16
}

type refKey struct {
	host   string
	port   uint16
	reason string
}

// Account counts one execution's egress. Safe for concurrent use.
type Account struct {
	mu      sync.Mutex
	dests   map[destKey]*destCounter
	refused map[refKey]*receipt.EgressRefusal
	order   []refKey
	dropped int64
}

type destCounter struct {
	address     string
	connections int64
	up, down    atomic.Int64
}

// NewAccount returns an empty account.
func NewAccount() *Account {
	return &Account{dests: map[destKey]*destCounter{}, refused: map[refKey]*receipt.EgressRefusal{}}
}

// connect records a connection to host:port at address and returns the
// counters its bytes go to (nil past the bound: the bytes are not named).
func (a *Account) connect(host string, port uint16, address string) *destCounter {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := destKey{host, port}
	d := a.dests[k]
	if d == nil {
		if len(a.dests) >= MaxDestinations {
			a.dropped++
			return nil
		}
		d = &destCounter{}
		a.dests[k] = d
	}
	d.address = address
	d.connections++
	return d
}

// refuse records a refusal; it reports whether this host, port and reason
// is new to the account (so a caller can report it once).
func (a *Account) refuse(host string, port uint16, reason, detail string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := refKey{host, port, reason}
	if r := a.refused[k]; r != nil {
		r.Count++
		return false
	}
	if len(a.refused) >= MaxRefusals {
		a.dropped++
		return false
	}
	a.refused[k] = &receipt.EgressRefusal{Host: host, Port: int(port), Reason: reason, Detail: detail, Count: 1}
	a.order = append(a.order, k)
	return true
}

// Summary returns the account so far as the receipt records it,
// destinations sorted by host and port, refusals in the order first seen.
func (a *Account) Summary(list string) *receipt.Egress {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &receipt.Egress{AllowList: list, Destinations: []receipt.EgressDestination{}, Refused: []receipt.EgressRefusal{}, Dropped: a.dropped}
	for k, d := range a.dests {
		s.Destinations = append(s.Destinations, receipt.EgressDestination{Host: k.host, Port: int(k.port), Address: d.address,
			Connections: d.connections, BytesUp: d.up.Load(), BytesDown: d.down.Load()})
	}
	sort.Slice(s.Destinations, func(i, j int) bool {
		x, y := s.Destinations[i], s.Destinations[j]
		return x.Host < y.Host || x.Host == y.Host && x.Port < y.Port
	})
	for _, k := range a.order {
		s.Refused = append(s.Refused, *a.refused[k])
	}
	return s
}
