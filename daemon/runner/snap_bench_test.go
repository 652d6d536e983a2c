//go:build linux

package runner

import "testing"

func BenchmarkSnapshot(b *testing.B) {
	for i := 0; i < b.N; i++ {
		snapshot()
	}
}
