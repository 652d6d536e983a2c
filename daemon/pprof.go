package daemon

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"runtime"

	"github.com/termd/termd/internal/loopback"
)

// startPprof serves Go's profiler on a loopback address (TERMD_DEBUG_PPROF),
// for performance work only, and /debug/stages: p50/p90 of each stage of the
// last executions (stages reports them). Mutex and block profiles are
// sampled too (/debug/pprof/mutex, /debug/pprof/block), to see what
// concurrent sessions wait on.
func startPprof(addr string, log *slog.Logger, stages func() string) {
	if loop, _ := loopback.Listen(addr); !loop {
		log.Warn("TERMD_DEBUG_PPROF ignored: not a loopback host:port", "addr", addr)
		return
	}
	runtime.SetMutexProfileFraction(10)
	runtime.SetBlockProfileRate(int(100 * 1000)) // one sample per 100 µs blocked
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/heap", pprof.Index)
	mux.HandleFunc("/debug/stages", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(stages()))
	})
	go func() { _ = http.ListenAndServe(addr, mux) }()
	log.Warn("profiling endpoint enabled", "addr", addr)
}
