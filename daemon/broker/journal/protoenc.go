package journal

import (
	"encoding/base64"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The plans and sessions in journal records are protojson (proto field
// names), which replay reads with protojson.Unmarshal. They are written
// here directly, field by field, as protojson would write them up to the
// order of map entries, spaces and which characters are escaped: protojson walks every message by
// reflection, and encoding records that way was ~5% of termd's CPU per
// execution. What protojson would refuse (a string that is not UTF-8, a
// timestamp out of its range) is left to protojson, which says so.
// TestDirectEncodingEveryField sets every field of every message written
// here, and FuzzDirectEncoding holds the encoding to protojson: a field
// added to one of these messages and not written here fails them.

// AppendPlan appends plan pp's protojson, its id first (planRecordID).
func AppendPlan(out []byte, pp *termdv1.Plan) ([]byte, error) {
	w := jw{b: out}
	w.plan(pp)
	return w.done(out, pp)
}

// AppendSession appends session ps's protojson.
func AppendSession(out []byte, ps *termdv1.Session) ([]byte, error) {
	w := jw{b: out}
	w.session(ps)
	return w.done(out, ps)
}

// jw writes protojson into b. Every object it writes starts with '{' and
// no value ends with one, so a key needs a comma before it exactly when
// the last byte is not '{'.
type jw struct {
	b []byte
	// bad: a value protojson refuses; done asks protojson for its error.
	bad bool
}

// done returns what w wrote after out, or protojson's encoding of m when a
// value was one protojson refuses (it then says why).
func (w *jw) done(out []byte, m proto.Message) ([]byte, error) {
	if !w.bad {
		return w.b, nil
	}
	j, err := pjm.Marshal(m)
	if err != nil {
		return out, err
	}
	return append(out, j...), nil
}

func (w *jw) key(name string) { w.b = appendKey(w.b, name) }

// open starts an object value under name (the field is set).
func (w *jw) open(name string) { w.key(name); w.b = append(w.b, '{') }

func (w *jw) close() { w.b = append(w.b, '}') }

func (w *jw) str(name, v string) {
	if v != "" {
		w.key(name)
		w.quote(v)
	}
}

func (w *jw) quote(v string) {
	if !utf8.ValidString(v) {
		w.bad = true
		return
	}
	w.b = appendJSONString(w.b, v)
}

// valid says whether every string in vs is UTF-8, else notes w bad.
func (w *jw) valid(vs ...string) bool {
	for _, v := range vs {
		if !utf8.ValidString(v) {
			w.bad = true
			return false
		}
	}
	return true
}

func (w *jw) flag(name string, v bool) {
	if v {
		w.key(name)
		w.b = append(w.b, "true"...)
	}
}

func (w *jw) u32(name string, v uint32) {
	if v != 0 {
		w.key(name)
		w.b = strconv.AppendUint(w.b, uint64(v), 10)
	}
}

func (w *jw) i32(name string, v int32) {
	if v != 0 {
		w.key(name)
		w.b = strconv.AppendInt(w.b, int64(v), 10)
	}
}

// i64 and u64 are strings in protojson.
func (w *jw) i64(name string, v int64) {
	if v != 0 {
		w.key(name)
		w.b = append(strconv.AppendInt(append(w.b, '"'), v, 10), '"')
	}
}

func (w *jw) u64(name string, v uint64) {
	if v != 0 {
		w.key(name)
		w.b = append(strconv.AppendUint(append(w.b, '"'), v, 10), '"')
	}
}

// enum writes an enum's name, or its number when it has none (as protojson).
func (w *jw) enum(name string, v int32, names map[int32]string) {
	if v == 0 {
		return
	}
	w.key(name)
	if n, ok := names[v]; ok {
		w.b = append(append(append(w.b, '"'), n...), '"')
	} else {
		w.b = strconv.AppendInt(w.b, int64(v), 10)
	}
}

func (w *jw) bytes(name string, v []byte) {
	if len(v) > 0 {
		w.key(name)
		w.b = append(base64.StdEncoding.AppendEncode(append(w.b, '"'), v), '"')
	}
}

func (w *jw) strs(name string, vs []string) {
	if len(vs) > 0 && w.valid(vs...) {
		w.key(name)
		w.b = appendStrings(w.b, vs)
	}
}

// strMap writes a map<string, string>, its keys sorted (as protojson).
func (w *jw) strMap(name string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	for k, v := range m {
		if !w.valid(k, v) {
			return
		}
	}
	w.key(name)
	w.b = appendStringMap(w.b, m)
}

// ts writes a timestamp as protojson does: RFC 3339 in UTC with 0, 3, 6
// or 9 fractional digits.
func (w *jw) ts(name string, t *timestamppb.Timestamp) {
	if t == nil {
		return
	}
	if t.Seconds < -62135596800 || t.Seconds > 253402300799 || t.Nanos < 0 || t.Nanos >= 1e9 {
		w.bad = true
		return
	}
	w.key(name)
	w.b = time.Unix(t.Seconds, int64(t.Nanos)).UTC().AppendFormat(append(w.b, '"'), "2006-01-02T15:04:05.000000000")
	for range 3 {
		if n := len(w.b); string(w.b[n-3:]) == "000" {
			w.b = w.b[:n-3]
		}
	}
	if w.b[len(w.b)-1] == '.' {
		w.b = w.b[:len(w.b)-1]
	}
	w.b = append(w.b, 'Z', '"')
}

func (w *jw) plan(p *termdv1.Plan) {
	w.b = append(w.b, '{')
	w.str("id", p.Id)
	w.str("session_id", p.SessionId)
	w.enum("state", int32(p.State), termdv1.PlanState_name)
	w.request("request", p.Request)
	w.decision("decision", p.Decision)
	w.preview("preview", p.Preview)
	if l := p.Limits; l != nil {
		w.open("limits")
		w.u32("timeout_seconds", l.TimeoutSeconds)
		w.i64("output_bytes", l.OutputBytes)
		w.i64("memory_bytes", l.MemoryBytes)
		w.i64("pids", l.Pids)
		w.u32("grace_seconds", l.GraceSeconds)
		w.close()
	}
	w.principal("requester", p.Requester)
	if a := p.Approval; a != nil {
		w.open("approval")
		w.principal("approver", a.Approver)
		w.ts("approved_at", a.ApprovedAt)
		w.ts("expires_at", a.ExpiresAt)
		w.str("request_hash", a.RequestHash)
		w.close()
	}
	if d := p.Denial; d != nil {
		w.open("denial")
		w.principal("denied_by", d.DeniedBy)
		w.ts("denied_at", d.DeniedAt)
		w.str("reason", d.Reason)
		w.close()
	}
	w.ts("created_at", p.CreatedAt)
	w.ts("updated_at", p.UpdatedAt)
	w.ts("expires_at", p.ExpiresAt)
	w.str("execution_id", p.ExecutionId)
	w.str("receipt_id", p.ReceiptId)
	w.str("replanned_from", p.ReplannedFrom)
	w.flag("flagged_by_adviser", p.FlaggedByAdviser)
	w.str("advice_digest", p.AdviceDigest)
	w.str("next_step", p.NextStep)
	w.str("grant_id", p.GrantId)
	w.close()
}

func (w *jw) session(s *termdv1.Session) {
	w.b = append(w.b, '{')
	w.str("id", s.Id)
	w.principal("owner", s.Owner)
	w.ts("created_at", s.CreatedAt)
	w.ts("last_active_at", s.LastActiveAt)
	w.ts("expires_at", s.ExpiresAt)
	w.flag("closed", s.Closed)
	w.str("active_execution_id", s.ActiveExecutionId)
	w.i32("plan_count", s.PlanCount)
	w.str("label", s.Label)
	w.u64("last_seq", s.LastSeq)
	w.close()
}

func (w *jw) principal(name string, p *termdv1.Principal) {
	if p == nil {
		return
	}
	w.open(name)
	w.u32("uid", p.Uid)
	w.u32("gid", p.Gid)
	w.i32("pid", p.Pid)
	w.str("name", p.Name)
	w.enum("role", int32(p.Role), termdv1.Role_name)
	w.str("via", p.Via)
	w.str("cert", p.Cert)
	w.str("gateway", p.Gateway)
	w.close()
}

func (w *jw) request(name string, r *termdv1.CommandRequest) {
	if r == nil {
		return
	}
	w.open(name)
	w.strs("argv", r.Argv)
	w.str("command", r.Command)
	w.str("cwd", r.Cwd)
	w.strMap("env", r.Env)
	w.enum("mode", int32(r.Mode), termdv1.Mode_name)
	w.u32("timeout_seconds", r.TimeoutSeconds)
	w.str("sandbox", r.Sandbox)
	w.terminal("tty", r.Tty)
	w.strs("credentials", r.Credentials)
	w.flag("privileged", r.Privileged)
	w.bytes("stdin", r.Stdin)
	w.str("network", r.Network)
	w.close()
}

func (w *jw) terminal(name string, t *termdv1.TerminalOptions) {
	if t == nil {
		return
	}
	w.open(name)
	w.u32("rows", t.Rows)
	w.u32("cols", t.Cols)
	w.u32("idle_timeout_seconds", t.IdleTimeoutSeconds)
	w.close()
}

func (w *jw) decision(name string, d *termdv1.Decision) {
	if d == nil {
		return
	}
	w.open(name)
	w.enum("verdict", int32(d.Verdict), termdv1.Verdict_name)
	w.enum("risk", int32(d.Risk), termdv1.Risk_name)
	w.strs("reasons", d.Reasons)
	w.strs("rules", d.Rules)
	w.str("policy_version", d.PolicyVersion)
	w.str("request_hash", d.RequestHash)
	w.strs("argv", d.Argv)
	w.str("resolved_path", d.ResolvedPath)
	w.str("binary_sha256", d.BinarySha256)
	w.str("cwd", d.Cwd)
	w.strMap("env", d.Env)
	w.enum("mode", int32(d.Mode), termdv1.Mode_name)
	w.flag("network", d.Network)
	w.flag("runs_project_code", d.RunsProjectCode)
	w.flag("read_only", d.ReadOnly)
	w.strs("writes", d.Writes)
	w.u32("timeout_seconds", d.TimeoutSeconds)
	w.str("run_as", d.RunAs)
	if len(d.Steps) > 0 {
		w.key("steps")
		w.b = append(w.b, '[')
		for i, s := range d.Steps {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, '{')
			if s != nil {
				w.str("name", s.Name)
				w.str("outcome", s.Outcome)
				w.str("detail", s.Detail)
			}
			w.close()
		}
		w.b = append(w.b, ']')
	}
	w.strs("exec_argv", d.ExecArgv)
	w.sandbox("sandbox", d.Sandbox)
	w.terminal("tty", d.Tty)
	w.strs("credentials", d.Credentials)
	w.flag("privileged", d.Privileged)
	if s := d.Stdin; s != nil {
		w.open("stdin")
		w.u64("bytes", s.Bytes)
		w.str("sha256", s.Sha256)
		w.close()
	}
	w.close()
}

func (w *jw) sandbox(name string, s *termdv1.SandboxProfile) {
	if s == nil {
		return
	}
	w.open(name)
	w.str("profile", s.Profile)
	w.flag("network", s.Network)
	w.strs("exec", s.Exec)
	w.strs("read", s.Read)
	w.strs("write", s.Write)
	w.str("enforcement", s.Enforcement)
	w.strs("cache", s.Cache)
	w.str("network_mode", s.NetworkMode)
	w.close()
}

func (w *jw) preview(name string, p *termdv1.Preview) {
	if p == nil {
		return
	}
	w.open(name)
	w.str("program", p.Program)
	w.strs("writes", p.Writes)
	w.flag("network", p.Network)
	w.flag("runs_project_code", p.RunsProjectCode)
	w.flag("read_only", p.ReadOnly)
	w.str("summary", p.Summary)
	w.sandbox("sandbox", p.Sandbox)
	w.close()
}
