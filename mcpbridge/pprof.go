package mcpbridge

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/termd/termd/internal/loopback"
)

// startPprof serves Go's profiles on a loopback address (TERMD_DEBUG_PPROF,
// as termd does), for performance work only: /debug/pprof/profile?seconds=N
// (CPU, default 30 s) and /debug/pprof/NAME (heap, goroutine, allocs, …;
// ?debug=1 for text), which `go tool pprof URL` reads. Not net/http/pprof:
// its init registers routes on http.DefaultServeMux at every start of
// termd-mcp (~0.5 ms of a cold start), whether the profiler is asked for
// or not.
func startPprof(addr string, log *slog.Logger) {
	if loop, _ := loopback.Listen(addr); !loop {
		log.Warn("TERMD_DEBUG_PPROF ignored: not a loopback host:port", "addr", addr)
		return
	}
	go func() { _ = http.ListenAndServe(addr, pprofMux()) }()
	log.Warn("profiling endpoint enabled", "addr", addr)
}

func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/profile", cpuProfile)
	mux.HandleFunc("GET /debug/pprof/{name}", namedProfile)
	return mux
}

// cpuProfile writes a CPU profile of the next ?seconds=N (default 30).
func cpuProfile(w http.ResponseWriter, r *http.Request) {
	secs := 30
	if s := r.FormValue("seconds"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			http.Error(w, "seconds must be a positive whole number", http.StatusBadRequest)
			return
		}
		secs = n
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if err := pprof.StartCPUProfile(w); err != nil {
		http.Error(w, "cannot start the CPU profile: "+err.Error(), http.StatusInternalServerError)
		return
	}
	select {
	case <-time.After(time.Duration(secs) * time.Second):
	case <-r.Context().Done():
	}
	pprof.StopCPUProfile()
}

// namedProfile writes one of runtime/pprof's profiles.
func namedProfile(w http.ResponseWriter, r *http.Request) {
	p := pprof.Lookup(r.PathValue("name"))
	if p == nil {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, "no such profile; there are:")
		for _, p := range pprof.Profiles() {
			fmt.Fprintln(w, p.Name())
		}
		return
	}
	if gc, _ := strconv.Atoi(r.FormValue("gc")); gc > 0 && p.Name() == "heap" {
		runtime.GC() // ?gc=1: what is live now, as net/http/pprof does
	}
	debug, _ := strconv.Atoi(r.FormValue("debug"))
	if debug == 0 {
		w.Header().Set("Content-Type", "application/octet-stream")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	_ = p.WriteTo(w, debug)
}
