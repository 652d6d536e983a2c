package executions

import (
	"bytes"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/daemon/runner"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Output is one execution as ReadOutput reads it, taken under the
// broker's lock: its process while it runs, else its receipt, else its
// final state.
type Output struct {
	Proc      *runner.Process
	ReceiptID string
	Exec      *termdv1.Execution // a copy
	Finished  bool
	Redactor  *receiptstore.Redactor
}

// ReadOutput reads redacted output by offset, while or after the command
// runs. It checks the request, then finds the execution (find) and reads
// its output from its process or its receipt (stored).
func ReadOutput(r *termdv1.ReadOutputRequest, find func() (Output, error), stored func(id string) (*receipt.Receipt, error)) (*termdv1.ReadOutputResponse, error) {
	stream := runner.Stdout
	switch r.Stream {
	case termdv1.OutputStream_OUTPUT_STREAM_UNSPECIFIED, termdv1.OutputStream_OUTPUT_STREAM_STDOUT:
	case termdv1.OutputStream_OUTPUT_STREAM_STDERR:
		stream = runner.Stderr
	default:
		return nil, errdefs.Invalid("stream %v is not stdout or stderr", r.Stream)
	}
	if r.Offset < 0 {
		return nil, errdefs.Invalid("offset %d is negative", r.Offset)
	}
	limit := int(r.Limit)
	if limit <= 0 {
		limit = 64 << 10
	}
	limit = min(limit, 1<<20)
	o, err := find()
	if err != nil {
		return nil, err
	}

	var kept []byte
	var total int64
	var done bool
	if o.Proc != nil {
		raw, t, d := o.Proc.ReadOutput(stream, 0, 1<<30)
		// While it runs, the unfinished last line (maybe half a secret) is
		// not served, as the live stream holds it back too.
		if i := bytes.LastIndexByte(raw, '\n'); i >= 0 {
			raw = raw[:i+1]
		} else {
			raw = raw[:max(0, len(raw)-receiptstore.DefaultHold)]
		}
		kept, total, done = []byte(o.Redactor.Redact(string(raw))), t, d
		done = false // the receipt, not the live buffer, is the final word
	} else if o.ReceiptID != "" {
		rc, err := stored(o.ReceiptID)
		if err != nil {
			return nil, errdefs.Internal("reading the receipt of execution %s: %v", r.ExecutionId, err)
		}
		if stream == runner.Stdout {
			kept, total = []byte(rc.Stdout), rc.StdoutBytes
		} else {
			kept, total = []byte(rc.Stderr), rc.StderrBytes
		}
		done = true
	} else {
		done = o.Finished
		if stream == runner.Stdout {
			total = o.Exec.StdoutBytes
		} else {
			total = o.Exec.StderrBytes
		}
	}
	resp := &termdv1.ReadOutputResponse{Offset: r.Offset, KeptBytes: int64(len(kept)), TotalBytes: total}
	resp.Truncated = total > int64(len(kept)) && done
	if r.Offset < int64(len(kept)) {
		end := min(int64(len(kept)), r.Offset+int64(limit))
		resp.Data = kept[r.Offset:end]
	}
	resp.NextOffset = r.Offset + int64(len(resp.Data))
	resp.Eof = done && resp.NextOffset >= int64(len(kept))
	return resp, nil
}
