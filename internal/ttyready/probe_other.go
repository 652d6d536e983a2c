//go:build !linux

package ttyready

import (
	"errors"
	"os"
)

// ForegroundReading needs /proc: on this system it always returns an error.
func ForegroundReading(ptmx *os.File) (reading bool, pid int, err error) {
	return false, 0, errors.New("readiness probing needs Linux: use a quiet time or a pattern instead")
}
