//go:build linux && cgo

// launch.c runs as a constructor before the Go runtime starts: it confines
// the process and execs the command. Linked statically, so that no dynamic
// loader runs before it (about 1 ms per execution here).

package main

// #cgo LDFLAGS: -static
import "C"
