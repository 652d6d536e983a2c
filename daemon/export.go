package daemon

import (
	"os"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/metrics"
	"github.com/termd/termd/daemon/otlpexport"
)

// startExport starts the OTLP receipt exporter when export.otlp or the
// OTEL_EXPORTER_OTLP_* environment turns it on (docs/EXPORT.md). Before the
// broker starts, so receipts it appends at start are exported too.
func (d *Daemon) startExport(cfg *config.Config) error {
	set, err := otlpexport.Resolve(cfg.Export.OTLP, os.Getenv)
	if err != nil {
		return err
	}
	if !set.Enabled {
		d.log.Debug("OTLP export " + set.Why)
		return nil
	}
	if d.export, err = otlpexport.New(set, cfg.StateDir, d.store, d.log); err != nil {
		return err
	}
	d.export.Start()
	return nil
}

// observeExport puts the exporter's lag on /metrics.
func (d *Daemon) observeExport() {
	x := d.export
	if x == nil {
		return
	}
	d.metrics.ObserveExport(metrics.ExportGauges{
		Lag:      func() int64 { return x.Status().Lag() },
		Exported: func() int64 { return x.Status().ExportedSeq },
		Failures: x.Failures,
		LastSuccess: func() float64 {
			t := x.Status().LastSuccessAt
			if t.IsZero() {
				return 0
			}
			return float64(t.UnixNano()) / 1e9
		},
	})
}
