//go:build !linux

package harness

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
