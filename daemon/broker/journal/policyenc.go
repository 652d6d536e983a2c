package journal

import (
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/policy"
)

// A plan record's request and decision (policy form) are the bytes
// json.Marshal writes for them, written here directly: encoding/json walks
// them by reflection, which was most of a plan's first record.
// TestPolicyEncodingIsJSONMarshal sets every field, and holds these bytes
// to json.Marshal's: a field added to Request, Decision or what they hold
// and not written here fails it.

// gw writes the bytes json.Marshal writes for the policy's types.
type gw struct{ b []byte }

// key writes an object's key; first says it is the object's first.
func (w *gw) key(name string, first bool) {
	if !first {
		w.b = append(w.b, ',')
	}
	w.b = append(append(append(w.b, '"'), name...), '"', ':')
}

func (w *gw) str(s string) { w.b = appendJSONString(w.b, s) }

func (w *gw) int(v int64) { w.b = strconv.AppendInt(w.b, v, 10) }

func (w *gw) flag(v bool) { w.b = strconv.AppendBool(w.b, v) }

// strs writes a []string (null when nil, as json.Marshal).
func (w *gw) strs(vs []string) {
	if vs == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = appendStrings(w.b, vs)
}

// strMap writes a map[string]string, keys sorted (null when nil).
func (w *gw) strMap(m map[string]string) {
	if m == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = appendStringMap(w.b, m)
}

// appendStrings appends vs as a JSON array of strings (appendJSONString).
func appendStrings(b []byte, vs []string) []byte {
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, v)
	}
	return append(b, ']')
}

// appendStringMap appends m as a JSON object, its keys sorted (as both
// json.Marshal and protojson write them).
func appendStringMap(b []byte, m map[string]string) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSONString(b, k), ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

func (w *gw) terminal(t *policy.Terminal) {
	if t == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = strconv.AppendUint(append(w.b, `{"rows":`...), uint64(t.Rows), 10)
	w.key("cols", false)
	w.b = strconv.AppendUint(w.b, uint64(t.Cols), 10)
	w.key("idle", false)
	w.int(int64(t.Idle))
	w.b = append(w.b, '}')
}

func (w *gw) stdin(s *policy.Stdin) {
	w.b = append(w.b, `{"bytes":`...)
	w.int(s.Bytes)
	w.key("sha256", false)
	w.str(s.SHA256)
	w.b = append(w.b, '}')
}

// appendRequest appends json.Marshal(r)'s bytes.
func appendRequest(out []byte, r *policy.Request) []byte {
	w := gw{b: append(out, '{')}
	w.key("Argv", true)
	w.strs(r.Argv)
	w.key("Command", false)
	w.str(r.Command)
	w.key("Cwd", false)
	w.str(r.Cwd)
	w.key("Env", false)
	w.strMap(r.Env)
	w.key("Mode", false)
	w.str(string(r.Mode))
	w.key("Timeout", false)
	w.int(int64(r.Timeout))
	w.key("Sandbox", false)
	w.str(r.Sandbox)
	w.key("TTY", false)
	w.terminal(r.TTY)
	w.key("Credentials", false)
	w.strs(r.Credentials)
	w.key("Privileged", false)
	w.flag(r.Privileged)
	w.key("Network", false)
	w.str(r.Network)
	if r.Stdin != nil {
		w.key("stdin", false)
		w.stdin(r.Stdin)
	}
	return append(w.b, '}')
}

// appendDecision appends json.Marshal(d)'s bytes.
func appendDecision(out []byte, d *policy.Decision) []byte {
	w := gw{b: append(out, '{')}
	w.key("verdict", true)
	w.str(string(d.Verdict))
	w.key("risk", false)
	w.str(string(d.Risk))
	w.key("reasons", false)
	w.strs(d.Reasons)
	w.key("rules", false)
	w.strs(d.Rules)
	w.key("mode", false)
	w.str(string(d.Mode))
	w.key("policy_version", false)
	w.str(d.PolicyVersion)
	w.key("request_hash", false)
	w.str(d.RequestHash)
	w.key("argv", false)
	w.strs(d.Argv)
	w.optStrs("exec_argv", d.ExecArgv)
	w.optStr("resolved_path", d.ResolvedPath)
	w.optStr("binary_sha256", d.BinarySHA256)
	w.optStr("cwd", d.Cwd)
	w.optMap("env", d.Env)
	w.optMap("exec_env", d.ExecEnv)
	w.key("timeout", false)
	w.int(int64(d.Timeout))
	w.key("network", false)
	w.flag(d.Network)
	w.key("runs_project_code", false)
	w.flag(d.RunsProjectCode)
	w.key("read_only", false)
	w.flag(d.ReadOnly)
	w.optStrs("writes", d.Writes)
	w.optMap("project_files", d.ProjectFiles)
	w.optStr("run_as", d.RunAs)
	w.key("sandbox", false)
	w.profile(&d.Sandbox)
	if d.TTY != nil {
		w.key("tty", false)
		w.terminal(d.TTY)
	}
	w.optStrs("credentials", d.Credentials)
	if d.Privileged {
		w.key("privileged", false)
		w.flag(true)
	}
	if d.Stdin != nil {
		w.key("stdin", false)
		w.stdin(d.Stdin)
	}
	w.key("steps", false)
	if d.Steps == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i, s := range d.Steps {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, `{"name":`...)
			w.str(s.Name)
			w.key("outcome", false)
			w.str(s.Outcome)
			w.optStr("detail", s.Detail)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	return append(w.b, '}')
}

func (w *gw) profile(p *domain.Profile) {
	w.b = append(w.b, `{"profile":`...)
	w.str(p.Profile)
	w.key("network", false)
	w.flag(p.Network)
	w.optStr("network_mode", p.NetworkMode)
	w.optStrs("exec", p.Exec)
	w.optStrs("read", p.Read)
	w.optStrs("write", p.Write)
	w.optStrs("cache", p.Cache)
	w.b = append(w.b, '}')
}

// optStr, optStrs and optMap write an omitempty field (never an object's first).
func (w *gw) optStr(name, v string) {
	if v != "" {
		w.key(name, false)
		w.str(v)
	}
}

func (w *gw) optStrs(name string, vs []string) {
	if len(vs) > 0 {
		w.key(name, false)
		w.strs(vs)
	}
}

func (w *gw) optMap(name string, m map[string]string) {
	if len(m) > 0 {
		w.key(name, false)
		w.strMap(m)
	}
}

// appendJSONString appends s as encoding/json writes a string: HTML's
// <, > and & escaped, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD
// (protojson, which refuses invalid UTF-8, reads the same string back).
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(dst, s[start:]...), '"')
}
