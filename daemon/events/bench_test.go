package events

import (
	"context"
	"fmt"
	"testing"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// BenchmarkPublish measures Publish of a 1 KiB output chunk with n idle
// subscribers on the session (they never read, so every Publish pokes all of
// them and the rings wrap), and with n subscribers draining concurrently.
func BenchmarkPublish(b *testing.B) {
	fill := func(e *termdv1.Event) {
		e.Payload = &termdv1.Event_Output{Output: &termdv1.OutputChunk{ExecutionId: "x", Data: make([]byte, 1024)}}
	}
	for _, n := range []int{0, 1, 64} {
		b.Run(fmt.Sprintf("idle-subs=%d", n), func(b *testing.B) {
			bus := New(Options{})
			bus.Publish("s", kCreated, nil)
			for i := 0; i < n; i++ {
				s, _ := bus.Subscribe("s", 0)
				defer s.Close()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bus.Publish("s", kOutput, fill)
			}
		})
	}
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("reading-subs=%d", n), func(b *testing.B) {
			bus := New(Options{})
			bus.Publish("s", kCreated, nil)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			for i := 0; i < n; i++ {
				s, _ := bus.Subscribe("s", 0)
				go func() {
					defer func() { done <- struct{}{} }()
					defer s.Close()
					for {
						if _, err := s.Next(ctx); err != nil {
							return
						}
					}
				}()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bus.Publish("s", kOutput, fill)
			}
			b.StopTimer()
			cancel()
			for i := 0; i < n; i++ {
				<-done
			}
		})
	}
}
