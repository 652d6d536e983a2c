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

// gw writes the bytes json.Marshal writes for the policy's types: each
// writer writes a field, its key and value (json.Marshal writes every field,
// null for a nil slice, map or pointer; the opt writers are omitempty's).
type gw struct{ b []byte }

func (w *gw) key(name string) { w.b = appendKey(w.b, name) }

func (w *gw) str(name, v string) { w.key(name); w.b = appendJSONString(w.b, v) }

func (w *gw) int(name string, v int64) { w.key(name); w.b = strconv.AppendInt(w.b, v, 10) }

func (w *gw) flag(name string, v bool) { w.key(name); w.b = strconv.AppendBool(w.b, v) }

func (w *gw) strs(name string, vs []string) {
	w.key(name)
	if vs == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = appendStrings(w.b, vs)
}

func (w *gw) strMap(name string, m map[string]string) {
	w.key(name)
	if m == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = appendStringMap(w.b, m)
}

// optStr, optStrs and optMap write an omitempty field.
func (w *gw) optStr(name, v string) {
	if v != "" {
		w.str(name, v)
	}
}

func (w *gw) optStrs(name string, vs []string) {
	if len(vs) > 0 {
		w.strs(name, vs)
	}
}

func (w *gw) optMap(name string, m map[string]string) {
	if len(m) > 0 {
		w.strMap(name, m)
	}
}

// appendKey appends an object's key, after a comma unless it is the
// object's first (b ends in its '{': no value ends in one).
func appendKey(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	return append(append(append(b, '"'), name...), '"', ':')
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

func (w *gw) terminal(name string, t *policy.Terminal) {
	w.key(name)
	if t == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '{')
	w.int("rows", int64(t.Rows))
	w.int("cols", int64(t.Cols))
	w.int("idle", int64(t.Idle))
	w.b = append(w.b, '}')
}

func (w *gw) stdin(name string, s *policy.Stdin) {
	w.key(name)
	w.b = append(w.b, '{')
	w.int("bytes", s.Bytes)
	w.str("sha256", s.SHA256)
	w.b = append(w.b, '}')
}

// appendRequest appends json.Marshal(r)'s bytes.
func appendRequest(out []byte, r *policy.Request) []byte {
	w := gw{b: append(out, '{')}
	w.strs("Argv", r.Argv)
	w.str("Command", r.Command)
	w.str("Cwd", r.Cwd)
	w.strMap("Env", r.Env)
	w.str("Mode", string(r.Mode))
	w.int("Timeout", int64(r.Timeout))
	w.str("Sandbox", r.Sandbox)
	w.terminal("TTY", r.TTY)
	w.strs("Credentials", r.Credentials)
	w.flag("Privileged", r.Privileged)
	w.str("Network", r.Network)
	if r.Stdin != nil {
		w.stdin("stdin", r.Stdin)
	}
	return append(w.b, '}')
}

// appendDecision appends json.Marshal(d)'s bytes.
func appendDecision(out []byte, d *policy.Decision) []byte {
	w := gw{b: append(out, '{')}
	w.str("verdict", string(d.Verdict))
	w.str("risk", string(d.Risk))
	w.strs("reasons", d.Reasons)
	w.strs("rules", d.Rules)
	w.str("mode", string(d.Mode))
	w.str("policy_version", d.PolicyVersion)
	w.str("request_hash", d.RequestHash)
	w.strs("argv", d.Argv)
	w.optStrs("exec_argv", d.ExecArgv)
	w.optStr("resolved_path", d.ResolvedPath)
	w.optStr("binary_sha256", d.BinarySHA256)
	w.optStr("cwd", d.Cwd)
	w.optMap("env", d.Env)
	w.optMap("exec_env", d.ExecEnv)
	w.int("timeout", int64(d.Timeout))
	w.flag("network", d.Network)
	w.flag("runs_project_code", d.RunsProjectCode)
	w.flag("read_only", d.ReadOnly)
	w.optStrs("writes", d.Writes)
	w.optMap("project_files", d.ProjectFiles)
	w.optStr("run_as", d.RunAs)
	w.profile("sandbox", &d.Sandbox)
	if d.TTY != nil {
		w.terminal("tty", d.TTY)
	}
	w.optStrs("credentials", d.Credentials)
	if d.Privileged {
		w.flag("privileged", true)
	}
	if d.Stdin != nil {
		w.stdin("stdin", d.Stdin)
	}
	w.key("steps")
	if d.Steps == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i, s := range d.Steps {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, '{')
			w.str("name", s.Name)
			w.str("outcome", s.Outcome)
			w.optStr("detail", s.Detail)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	return append(w.b, '}')
}

func (w *gw) profile(name string, p *domain.Profile) {
	w.key(name)
	w.b = append(w.b, '{')
	w.str("profile", p.Profile)
	w.flag("network", p.Network)
	w.optStr("network_mode", p.NetworkMode)
	w.optStrs("exec", p.Exec)
	w.optStrs("read", p.Read)
	w.optStrs("write", p.Write)
	w.optStrs("cache", p.Cache)
	w.b = append(w.b, '}')
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
