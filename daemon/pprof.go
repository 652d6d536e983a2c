package daemon

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// startPprof serves Go's profiler on a loopback address (TERMD_DEBUG_PPROF),
// for performance work only.
func startPprof(addr string, log *slog.Logger) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		log.Warn("TERMD_DEBUG_PPROF ignored: not a loopback host:port", "addr", addr)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/heap", pprof.Index)
	go func() { _ = http.ListenAndServe(addr, mux) }()
	log.Warn("profiling endpoint enabled", "addr", addr)
}
