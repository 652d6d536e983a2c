//go:build linux && !amd64

package ttyready

var archSyscalls = map[uint64]syscallKind{}
