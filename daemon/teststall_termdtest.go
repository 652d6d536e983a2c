//go:build termdtest

package daemon

import (
	"fmt"
	"os"
	"strings"
)

// testStall is the broker's Stall hook in termd built for the end-to-end
// tests (the termdtest tag, internal/harness): TERMD_TEST_STALL=POINT:FILE
// stops the daemon forever, once, at POINT while FILE exists (it is
// removed, so a restarted daemon runs on), so that a test can kill -9 termd
// there. The points are broker.Deps.Stall's: "spawn", "release", "compact".
func testStall() func(point string) {
	at, file, ok := strings.Cut(os.Getenv("TERMD_TEST_STALL"), ":")
	if !ok {
		return nil
	}
	return func(point string) {
		if point != at || os.Remove(file) != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "termd: TERMD_TEST_STALL=%s: holding termd here until killed\n", point)
		select {}
	}
}
