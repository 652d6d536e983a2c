//go:build linux && cgo

// launch.c runs from the binary's entry point, before the C library and the
// Go runtime start: it confines the process and execs the command. Linked
// statically, so that no dynamic loader runs before it (about 1 ms per
// execution here), and built without the stack protector, whose canary lives
// in thread-local storage that nothing has set up yet.

package main

// #cgo CFLAGS: -fno-stack-protector
// #cgo LDFLAGS: -static -Wl,-e,tlentry
import "C"
