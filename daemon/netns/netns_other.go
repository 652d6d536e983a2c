//go:build !linux

package netns

import (
	"context"
	"errors"
	"net"
	"time"
)

// Manager: without Linux network namespaces there are no workspace
// loopbacks; New says so and executions asked for one run with no network.
type Manager struct{}

// Handle is never handed out here.
type Handle struct{}

var errNoNetNS = &ErrUnavailable{Why: "this operating system has no network namespaces (Linux only)"}

func New(func() time.Duration) (*Manager, error) { return nil, errNoNetNS }
func (m *Manager) Acquire(Key) (*Handle, error)  { return nil, errNoNetNS }
func (m *Manager) Hold(k Key) (*Handle, error)   { return nil, noSpace(k) }
func (m *Manager) List() []Info                  { return nil }
func (m *Manager) Close()                        {}
func (h *Handle) Fd() int                        { return -1 }
func (h *Handle) Key() Key                       { return Key{} }
func (h *Handle) Release()                       {}
func (m *Manager) Dial(context.Context, *Handle, string, string) (net.Conn, error) {
	return nil, errNoNetNS
}
func (m *Manager) Listen(*Handle, string, string) (net.Listener, error) {
	return nil, errNoNetNS
}

// Check reports that there are none.
func Check() error { return errors.New(errNoNetNS.Error()) }
