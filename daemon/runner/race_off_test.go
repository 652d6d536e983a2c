//go:build linux && !race

package runner

const memoryBoundSlack = 1
