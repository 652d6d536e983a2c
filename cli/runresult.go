package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// runResult is what `termctl run -o json` and `execute --follow -o json`
// print: one document a script parses, whatever happened — the plan, the
// execution's final state, its exit code (null when it has none), the
// receipt id and the captured output.
type runResult struct {
	PlanID    string
	Plan      *termdv1.Plan
	Execution *termdv1.Execution
	ReceiptID string
	stdout    capture
	stderr    capture
	printed   bool // the verb already printed its result (run --detach)
}

// captureLimit bounds what -o json holds of each stream; the rest is read
// with `termctl output EXECUTION_ID`.
const captureLimit = 8 << 20

type capture struct {
	buf       bytes.Buffer
	truncated bool
}

func (c *capture) Write(p []byte) (int, error) {
	room := captureLimit - c.buf.Len()
	if room < len(p) {
		c.truncated = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (r *runResult) sink(s termdv1.OutputStream) io.Writer {
	if s == termdv1.OutputStream_OUTPUT_STREAM_STDERR {
		return &r.stderr
	}
	return &r.stdout
}

// ownFailure gives run's and execute --follow's own failures (termd
// unreachable, a bad request, a lost stream) exit code 125, so 1 and 2 are
// only ever the command's.
func ownFailure(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) && (ee.command || (ee.code != ExitError && ee.code != ExitUsage)) {
		return err
	}
	return exitWith(ExitRefused, err)
}

// reportRun ends run and execute --follow: with -o table err is returned as
// it is (the output has streamed); with -o json|yaml one document goes to
// stdout, whatever happened.
func (a *app) reportRun(res *runResult, err error) error {
	err = ownFailure(err)
	if a.output == "table" || res.printed {
		return err
	}
	return a.printResult(res, err)
}

// printResult writes res as one JSON or YAML document and keeps err's exit
// code; err's message goes into the document and to stderr.
func (a *app) printResult(res *runResult, err error) error {
	doc := map[string]any{"plan_id": res.PlanID}
	if p := res.Plan; p != nil {
		d := p.GetDecision()
		doc["plan_state"] = planStateWord(p.State)
		doc["verdict"] = verdictWord(d.GetVerdict())
		doc["argv"] = d.GetArgv()
		doc["request_hash"] = d.GetRequestHash()
		if len(d.GetReasons()) > 0 {
			doc["reasons"] = d.GetReasons()
		}
	}
	var exit any // null: the command has no exit code (it did not run, or was killed)
	if ex := res.Execution; ex != nil {
		raw, merr := toJSON(ex)
		if merr != nil {
			return merr
		}
		doc["execution"] = json.RawMessage(raw)
		doc["execution_id"] = ex.Id
		doc["state"] = execStateWord(ex.State)
		switch ex.State {
		case termdv1.ExecutionState_EXECUTION_STATE_SUCCEEDED, termdv1.ExecutionState_EXECUTION_STATE_FAILED:
			if ex.Error == "" {
				exit = ex.ExitCode
			}
		}
		doc["stdout"] = res.stdout.buf.String()
		doc["stderr"] = res.stderr.buf.String()
		doc["stdout_bytes"] = ex.StdoutBytes
		doc["stderr_bytes"] = ex.StderrBytes
		if res.stdout.truncated || res.stderr.truncated {
			doc["captured_truncated"] = true
			doc["hint"] = fmt.Sprintf("only the first %d MiB of each stream are held here: `termctl output %s` reads the rest", captureLimit>>20, ex.Id)
		}
	}
	doc["exit_code"] = exit
	doc["receipt_id"] = res.ReceiptID
	code := ExitOK
	if err != nil {
		var ec interface{ ExitCode() int }
		code = ExitRefused
		if errors.As(err, &ec) {
			code = ec.ExitCode()
		}
		if msg := err.Error(); msg != "" {
			doc["error"] = msg
		}
	}
	doc["termctl_exit_code"] = code
	if _, perr := a.printData(doc); perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	return nil
}
