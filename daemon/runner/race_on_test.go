//go:build linux && race

package runner

// The race detector's shadow memory inflates every allocation several times.
const memoryBoundSlack = 4
