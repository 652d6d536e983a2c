package vt

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkWrite feeds typical output: coloured log lines scrolling a
// screen, so each line also goes to the scrollback.
func BenchmarkWrite(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&buf, "\x1b[32m2026-12-02T01:00:%02d\x1b[0m INFO request %d handled in %d ms: GET /api/v1/items?page=%d\r\n", i%60, i, i%97, i)
	}
	data := buf.Bytes()
	term := New(50, 160, Options{})
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		term.Write(data)
	}
}
