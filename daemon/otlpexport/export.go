// Package otlpexport sends every signed receipt out as an OpenTelemetry log
// record over OTLP (gRPC or HTTP), with the OpenTelemetry Go SDK's log
// exporters, to a collector or any OTLP backend (docs/EXPORT.md).
//
// It follows the receipt store the way the search index does: after each
// commit it is told (a non-blocking signal), and it reads receipts after its
// cursor from the store in batches. So an execution never waits for the
// exporter, and the exporter never holds more than one batch in memory:
// whatever the collector has not acknowledged stays in the chain and is read
// again. The cursor (last acknowledged seq) is written durably after every
// acknowledged batch; after a collector outage or a termd restart export
// resumes from it. A batch is sent again when its acknowledgement was lost,
// so a backend may hold a receipt twice: the receipt id tells them apart.
package otlpexport

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/internal/buildinfo"
)

// Scope is the instrumentation scope of the records.
const Scope = "github.com/termd/termd/receipts"

// EventName is the records' event name.
const EventName = "termd.receipt"

// maxBatchBytes bounds one request's receipt bodies (a collector's gRPC
// receiver takes 4 MiB by default); one larger receipt still goes alone.
const maxBatchBytes = 3 << 20

// Store is what the exporter reads: the receipt store.
type Store interface {
	After(seq int64, limit int) ([]receiptstore.Stored, error)
	FirstSeq() (int64, error)
	Head() (int64, string, error)
	OnChange(fn func())
}

// Exporter follows the receipt store and exports what it appends.
type Exporter struct {
	set    Settings
	dir    string
	store  Store
	log    *slog.Logger
	exp    sdklog.Exporter
	lp     *sdklog.LoggerProvider
	logger otellog.Logger
	col    *collect

	wake   chan struct{}
	stop   context.CancelFunc
	ctx    context.Context
	done   chan struct{}
	cursor Cursor // acknowledged up to here (in memory)
	// onDisk is the cursor's seq in the state dir, written at most once per
	// cursorEvery while receipts keep coming, and when export goes idle or
	// stops: a crash re-exports at most that long's receipts, as duplicates
	// a backend tells apart by receipt id, instead of two fsyncs a receipt.
	onDisk int64
	diskAt time.Time

	mu     sync.Mutex
	status Status
	failed atomic.Int64 // export attempts that failed since start
	wrote  time.Time    // last status file write
	wroteS Status       // what it said
}

// New builds the exporter (nil, nil when export is off). It reads the
// cursor in dir (the state directory); Start begins exporting.
func New(set Settings, dir string, store Store, log *slog.Logger) (*Exporter, error) {
	if !set.Enabled {
		return nil, nil
	}
	cur, err := ReadCursor(dir)
	if err != nil {
		return nil, err
	}
	exp, err := newSDKExporter(set)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(context.Background(), resource.WithAttributes(
		attribute.String("service.name", "termd"),
		attribute.String("service.version", buildinfo.Version),
		attribute.String("host.name", set.HostName),
	))
	if err != nil {
		return nil, fmt.Errorf("otlp export: %w", err)
	}
	col := &collect{}
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(col))
	x := &Exporter{
		set: set, dir: dir, store: store, log: log.With("component", "otlp-export"),
		exp: exp, lp: lp, col: col, logger: lp.Logger(Scope, otellog.WithInstrumentationVersion(buildinfo.Version)),
		wake: make(chan struct{}, 1), done: make(chan struct{}), cursor: cur, onDisk: cur.Seq,
	}
	x.status = Status{Endpoint: set.Endpoint, Protocol: set.Protocol, ExportedSeq: cur.Seq, PID: os.Getpid()}
	x.ctx, x.stop = context.WithCancel(context.Background())
	return x, nil
}

func newSDKExporter(set Settings) (sdklog.Exporter, error) {
	tlsCfg, err := set.tlsConfig()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	// termd retries itself (with the cursor), so the SDK's own retry is off:
	// a failure is seen at once, logged and counted.
	if set.Protocol == config.OTLPGRPC {
		opts := []otlploggrpc.Option{otlploggrpc.WithTimeout(set.timeout()), otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}),
			// gRPC's own reconnect backoff grows to 120s: after a long outage
			// the collector would wait that long for termd. Capped like
			// termd's retries instead.
			otlploggrpc.WithDialOption(grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: set.maxBackoff()},
				MinConnectTimeout: set.timeout(),
			}))}
		if set.fromConfig {
			opts = append(opts, otlploggrpc.WithEndpointURL(set.Endpoint))
		}
		if len(set.cfg.Headers) > 0 {
			opts = append(opts, otlploggrpc.WithHeaders(set.cfg.Headers))
		}
		if tlsCfg != nil {
			opts = append(opts, otlploggrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
		}
		e, err := otlploggrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp export (grpc to %s): %w", set.Endpoint, err)
		}
		return e, nil
	}
	opts := []otlploghttp.Option{otlploghttp.WithTimeout(set.timeout()), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false})}
	if set.fromConfig {
		opts = append(opts, otlploghttp.WithEndpointURL(set.Endpoint))
	}
	if len(set.cfg.Headers) > 0 {
		opts = append(opts, otlploghttp.WithHeaders(set.cfg.Headers))
	}
	if tlsCfg != nil {
		opts = append(opts, otlploghttp.WithTLSClientConfig(tlsCfg))
	}
	e, err := otlploghttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp export (http/protobuf to %s): %w", set.Endpoint, err)
	}
	return e, nil
}

// Start follows the store in the background; call it before receipts are
// appended so none is missed (the cursor catches up on the rest anyway).
func (x *Exporter) Start() {
	if x == nil {
		return
	}
	x.store.OnChange(x.notify)
	x.log.Info("exporting receipts over OTLP", "endpoint", x.set.Endpoint, "protocol", x.set.Protocol, "from_seq", x.cursor.Seq+1, "host", x.set.HostName)
	go x.run()
	x.notify()
}

func (x *Exporter) notify() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// Close stops exporting (what is not acknowledged is exported after the
// next start) and shuts the SDK exporter down.
func (x *Exporter) Close() {
	if x == nil {
		return
	}
	x.stop()
	<-x.done
	if err := x.saveCursor(); err != nil {
		x.log.Warn("the export cursor was not saved: receipts since the last save are exported again after the restart", "error", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = x.lp.Shutdown(ctx)
	_ = x.exp.Shutdown(ctx)
	x.writeStatus(true)
}

// Status is the exporter's state now.
func (x *Exporter) Status() Status {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.status
	if head, _, err := x.store.Head(); err == nil {
		s.HeadSeq = head
	}
	return s
}

// Failures counts failed export attempts since start.
func (x *Exporter) Failures() int64 { return x.failed.Load() }

func (x *Exporter) run() {
	defer close(x.done)
	backoff := time.Duration(0)
	for {
		progressed, err := x.round()
		switch {
		case err != nil:
			backoff = nextBackoff(backoff, x.set.maxBackoff())
			x.fail(err, backoff)
			if !x.sleep(backoff) {
				return
			}
			continue
		case progressed:
			backoff = 0
			if x.ctx.Err() != nil {
				return
			}
			continue // more may be waiting: read on before sleeping
		}
		x.writeStatus(x.Status() != x.wroteS) // idle: the file shows the last state
		if !x.idle() {
			return
		}
	}
}

// idle waits for more receipts or the end. With the cursor ahead of the
// disk it writes the cursor once cursorEvery has passed since the last
// write, unless more receipts come first. false: the exporter is stopping.
func (x *Exporter) idle() bool {
	var flush <-chan time.Time
	if x.onDisk != x.cursor.Seq {
		t := time.NewTimer(time.Until(x.diskAt.Add(cursorEvery)))
		defer t.Stop()
		flush = t.C
	}
	select {
	case <-x.ctx.Done():
		return false
	case <-x.wake:
	case <-flush:
		if err := x.saveCursor(); err != nil {
			x.fail(err, 0)
		}
	}
	return true
}

// cursorEvery is how often, at most, the cursor is written while receipts
// keep being exported.
const cursorEvery = time.Second

// saveCursor writes the cursor to the state dir if it moved.
func (x *Exporter) saveCursor() error {
	if x.onDisk == x.cursor.Seq {
		return nil
	}
	if err := writeCursor(x.dir, x.cursor); err != nil {
		// Exported but not recorded: those receipts go again after a restart.
		return fmt.Errorf("writing the export cursor: %w", err)
	}
	x.onDisk, x.diskAt = x.cursor.Seq, time.Now()
	return nil
}

// round exports one batch after the cursor; progressed is false when there
// was nothing to export.
func (x *Exporter) round() (progressed bool, err error) {
	batch, err := x.store.After(x.cursor.Seq, x.set.batch())
	if err != nil {
		return false, fmt.Errorf("reading the receipt store: %w", err)
	}
	if len(batch) == 0 {
		return false, nil
	}
	if gap := batch[0].Seq - x.cursor.Seq - 1; gap > 0 {
		// Receipts a checkpoint pruned before they were exported: they are
		// gone from this host; the checkpoint still proves the chain.
		x.log.Error("receipts were pruned before they could be exported: the backend will not have them", "from_seq", x.cursor.Seq+1, "to_seq", batch[0].Seq-1, "count", gap)
		x.mu.Lock()
		x.status.Skipped += gap
		x.mu.Unlock()
	}
	n, size := 0, 0
	for _, st := range batch {
		if n > 0 && size+len(st.Body) > maxBatchBytes {
			break
		}
		if err := x.emit(st); err != nil {
			x.col.take()
			return false, err
		}
		n++
		size += len(st.Body)
	}
	batch = batch[:n]
	recs := x.col.take()
	ctx, cancel := context.WithTimeout(x.ctx, x.set.timeout())
	err = x.exp.Export(ctx, recs)
	cancel()
	if err != nil {
		return false, fmt.Errorf("exporting receipts %d..%d to %s: %w", batch[0].Seq, batch[n-1].Seq, x.set.Endpoint, err)
	}
	last := batch[n-1]
	cur := Cursor{Seq: last.Seq, Endpoint: x.set.Endpoint, At: time.Now().UTC()}
	if r, err := last.Decode(); err == nil {
		cur.ReceiptID = r.ID
	}
	x.cursor = cur
	if time.Since(x.diskAt) >= cursorEvery {
		if err := x.saveCursor(); err != nil {
			return false, err
		}
	}
	x.mu.Lock()
	x.status.ExportedSeq = cur.Seq
	x.status.Exported += int64(n)
	x.status.LastSuccessAt = cur.At
	recovered := x.status.LastError != ""
	x.mu.Unlock()
	if recovered {
		x.log.Info("OTLP export recovered", "exported_seq", cur.Seq)
	}
	return true, nil
}

// emit turns one stored receipt into a log record through the SDK's
// logger (the collect processor keeps it for the batch).
func (x *Exporter) emit(st receiptstore.Stored) error {
	r, err := st.Decode()
	if err != nil {
		return fmt.Errorf("receipt seq %d cannot be read: %w", st.Seq, err)
	}
	var rec otellog.Record
	rec.SetEventName(EventName)
	rec.SetTimestamp(r.FinishedAt)
	rec.SetObservedTimestamp(time.Now())
	rec.SetSeverity(otellog.SeverityInfo)
	rec.SetSeverityText("INFO")
	// The body is the receipt exactly as signed and stored: its canonical
	// JSON, which `termctl receipts verify` checks with the host's public key.
	rec.SetBody(attribute.StringValue(string(st.Body)))
	attrs := []attribute.KeyValue{
		attribute.String("host.name", x.set.HostName),
		attribute.String("termd.receipt.id", r.ID),
		attribute.Int64("termd.receipt.seq", r.Seq),
		attribute.String("termd.receipt.hash", st.Hash),
		attribute.String("termd.receipt.schema_version", r.SchemaVersion),
		attribute.String("termd.session.id", r.SessionID),
		attribute.String("termd.plan.id", r.PlanID),
		attribute.String("termd.principal", r.Requester.ID),
		attribute.String("termd.principal.role", r.Requester.Role),
		attribute.String("termd.status", string(r.Status)),
	}
	if r.Approver != nil {
		attrs = append(attrs, attribute.String("termd.approver", r.Approver.ID))
	}
	if r.KeyID != "" {
		attrs = append(attrs, attribute.String("termd.key_id", r.KeyID))
	}
	if r.ExitCode != nil {
		attrs = append(attrs, attribute.Int("termd.exit_code", *r.ExitCode))
	}
	rec.AddAttributes(attrs...)
	x.logger.Emit(context.Background(), rec)
	return nil
}

func (x *Exporter) fail(err error, retry time.Duration) {
	x.failed.Add(1)
	now := time.Now().UTC()
	x.mu.Lock()
	first := x.status.LastError == "" || x.status.LastSuccessAt.After(x.status.LastErrorAt)
	x.status.LastError, x.status.LastErrorAt = err.Error(), now
	x.mu.Unlock()
	if first {
		x.log.Warn("OTLP export failing; receipts stay in the chain and are exported when it succeeds", "error", err, "retry_in", retry.String())
	} else {
		x.log.Debug("OTLP export still failing", "error", err, "retry_in", retry.String())
	}
	x.writeStatus(false)
}

// sleep waits d, or less when termd stops (false then).
func (x *Exporter) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-x.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// nextBackoff doubles from 250ms up to max, with up to 20% jitter so many
// hosts do not retry in step after a collector restart.
func nextBackoff(prev, max time.Duration) time.Duration {
	d := 2 * prev
	if d < 250*time.Millisecond {
		d = 250 * time.Millisecond
	}
	if d > max {
		d = max
	}
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// writeStatus writes the status file for `termd doctor`, at most once a
// second unless force.
func (x *Exporter) writeStatus(force bool) {
	now := time.Now()
	if !force && now.Sub(x.wrote) < time.Second {
		return
	}
	x.wrote = now
	s := x.Status()
	x.wroteS = s
	s.Updated = now.UTC()
	if err := writeStatusFile(x.dir, s); err != nil {
		x.log.Debug("cannot write the export status file", "error", err)
	}
}

// collect is the SDK log processor that keeps emitted records for the
// exporter's next request: termd sends each batch itself, synchronously,
// so it knows exactly which receipts the collector acknowledged.
type collect struct {
	mu   sync.Mutex
	recs []sdklog.Record
}

func (c *collect) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	return nil
}

func (c *collect) take() []sdklog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.recs
	c.recs = nil
	return out
}

func (c *collect) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *collect) Shutdown(context.Context) error                         { return nil }
func (c *collect) ForceFlush(context.Context) error                       { return nil }
