//go:build !linux

package egress

import (
	"errors"
	"net"
)

// ListenInNetns needs Linux network namespaces.
func ListenInNetns(nsfd int, addr string) (net.Listener, error) {
	return nil, errors.New("the egress proxy needs Linux network namespaces")
}

// NewNetns needs Linux network namespaces.
func NewNetns() (int, error) {
	return -1, errors.New("the egress proxy needs Linux network namespaces")
}

// SelfTest needs Linux network namespaces.
func SelfTest() error {
	return errors.New("the egress proxy needs Linux network namespaces")
}
