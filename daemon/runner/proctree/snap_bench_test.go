//go:build linux

package proctree

import "testing"

func BenchmarkSnapshot(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Snapshot()
	}
}
