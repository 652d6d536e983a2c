package mcpbridge

import (
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/termd/termd/internal/loopback"
)

// startPprof serves Go's CPU profiler on a loopback address
// (TERMD_DEBUG_PPROF, as termd does), for performance work only.
func startPprof(addr string, log *slog.Logger) {
	if loop, _ := loopback.Listen(addr); !loop {
		log.Warn("TERMD_DEBUG_PPROF ignored: not a loopback host:port", "addr", addr)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go func() { _ = http.ListenAndServe(addr, mux) }()
	log.Warn("profiling endpoint enabled", "addr", addr)
}
