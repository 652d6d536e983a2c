//go:build !termdtest

package daemon

// testStall is the broker's Stall hook (broker.Deps.Stall): none in termd as
// built for use. The end-to-end tests build termd with the termdtest tag
// (internal/harness), which gives the one in teststall_termdtest.go.
func testStall() func(point string) { return nil }
