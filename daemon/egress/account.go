package egress

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Bounds on what one execution's account holds (a command that connects to
// ever new names fills them; past them it is only counted).
const (
	MaxDestinations = 256
	MaxRefusals     = 256
)

// Destination is one host and port an execution reached through the proxy.
type Destination struct {
	Host        string `json:"host"`
	Port        uint16 `json:"port"`
	Address     string `json:"address,omitempty"` // the address dialed (last one)
	Connections int64  `json:"connections"`
	BytesUp     int64  `json:"bytes_up"`   // to the destination
	BytesDown   int64  `json:"bytes_down"` // from the destination
}

// Refusal is a destination the proxy refused (or could not reach), with how
// many times.
type Refusal struct {
	Host   string `json:"host"`
	Port   uint16 `json:"port"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
	Count  int64  `json:"count"`
}

// Summary is an account as the receipt records it.
type Summary struct {
	AllowList    string        `json:"allow_list"`
	Destinations []Destination `json:"destinations"`
	Refused      []Refusal     `json:"refused"`
	// Dropped counts destinations and refusals past the bounds (counted, not
	// named).
	Dropped int64 `json:"dropped,omitempty"`
}

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
	refused map[refKey]*Refusal
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
	return &Account{dests: map[destKey]*destCounter{}, refused: map[refKey]*Refusal{}}
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
	a.refused[k] = &Refusal{Host: host, Port: port, Reason: reason, Detail: detail, Count: 1}
	a.order = append(a.order, k)
	return true
}

// Summary returns the account so far, destinations sorted by host and
// port, refusals in the order first seen.
func (a *Account) Summary(list string) Summary {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Summary{AllowList: list, Destinations: []Destination{}, Refused: []Refusal{}, Dropped: a.dropped}
	for k, d := range a.dests {
		s.Destinations = append(s.Destinations, Destination{Host: k.host, Port: k.port, Address: d.address,
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
