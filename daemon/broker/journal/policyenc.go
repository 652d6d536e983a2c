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

// gw writes the bytes json.Marshal writes for the policy's types: jw's
// keys, objects and flags; put* for the fields written whatever their
// value, str, strs and strMap for omitempty ones (a string's invalid UTF-8
// written as U+FFFD, as encoding/json does, where protojson refuses it);
// its own terminal, stdin, profile and steps for the policy's types.
type gw struct{ jw }

// newGW starts an object after out.
func newGW(out []byte) gw { return gw{jw{b: append(out, '{')}} }

func (w *gw) null() { w.b = append(w.b, "null"...) }

func (w *gw) putStr(name, v string) {
	w.key(name)
	w.b = appendJSONString(w.b, v)
}

func (w *gw) putInt(name string, v int64) {
	w.key(name)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *gw) putFlag(name string, v bool) {
	w.key(name)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *gw) str(name, v string) {
	if v != "" {
		w.putStr(name, v)
	}
}

func (w *gw) strs(name string, vs []string) {
	if len(vs) > 0 {
		w.putStrs(name, vs)
	}
}

func (w *gw) strMap(name string, m map[string]string) {
	if len(m) > 0 {
		w.putMap(name, m)
	}
}

// putStrs writes a []string (null when nil, as json.Marshal).
func (w *gw) putStrs(name string, vs []string) {
	w.key(name)
	if vs == nil {
		w.null()
		return
	}
	w.b = appendStrings(w.b, vs)
}

// putMap writes a map[string]string, keys sorted (null when nil).
func (w *gw) putMap(name string, m map[string]string) {
	w.key(name)
	if m == nil {
		w.null()
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

// terminal writes t (null when nil).
func (w *gw) terminal(name string, t *policy.Terminal) {
	if t == nil {
		w.key(name)
		w.null()
		return
	}
	w.open(name)
	w.putInt("rows", int64(t.Rows))
	w.putInt("cols", int64(t.Cols))
	w.putInt("idle", int64(t.Idle))
	w.close()
}

// stdin writes s, an omitempty field.
func (w *gw) stdin(s *policy.Stdin) {
	if s == nil {
		return
	}
	w.open("stdin")
	w.putInt("bytes", s.Bytes)
	w.putStr("sha256", s.SHA256)
	w.close()
}

// appendRequest appends json.Marshal(r)'s bytes.
func appendRequest(out []byte, r *policy.Request) []byte {
	w := newGW(out)
	w.putStrs("Argv", r.Argv)
	w.putStr("Command", r.Command)
	w.putStr("Cwd", r.Cwd)
	w.putMap("Env", r.Env)
	w.putStr("Mode", string(r.Mode))
	w.putInt("Timeout", int64(r.Timeout))
	w.putStr("Sandbox", r.Sandbox)
	w.terminal("TTY", r.TTY)
	w.putStrs("Credentials", r.Credentials)
	w.putFlag("Privileged", r.Privileged)
	w.putStr("Network", r.Network)
	w.stdin(r.Stdin)
	w.close()
	return w.b
}

// appendDecision appends json.Marshal(d)'s bytes.
func appendDecision(out []byte, d *policy.Decision) []byte {
	w := newGW(out)
	w.putStr("verdict", string(d.Verdict))
	w.putStr("risk", string(d.Risk))
	w.putStrs("reasons", d.Reasons)
	w.putStrs("rules", d.Rules)
	w.putStr("mode", string(d.Mode))
	w.putStr("policy_version", d.PolicyVersion)
	w.putStr("request_hash", d.RequestHash)
	w.putStrs("argv", d.Argv)
	w.strs("exec_argv", d.ExecArgv)
	w.str("resolved_path", d.ResolvedPath)
	w.str("binary_sha256", d.BinarySHA256)
	w.str("cwd", d.Cwd)
	w.strMap("env", d.Env)
	w.strMap("exec_env", d.ExecEnv)
	w.putInt("timeout", int64(d.Timeout))
	w.putFlag("network", d.Network)
	w.putFlag("runs_project_code", d.RunsProjectCode)
	w.putFlag("read_only", d.ReadOnly)
	w.strs("writes", d.Writes)
	w.strMap("project_files", d.ProjectFiles)
	w.str("run_as", d.RunAs)
	w.profile("sandbox", &d.Sandbox)
	if d.TTY != nil {
		w.terminal("tty", d.TTY)
	}
	w.strs("credentials", d.Credentials)
	w.flag("privileged", d.Privileged)
	w.stdin(d.Stdin)
	w.steps(d.Steps)
	w.close()
	return w.b
}

// steps writes the decision's steps (null when nil).
func (w *gw) steps(steps []policy.Step) {
	w.key("steps")
	if steps == nil {
		w.null()
		return
	}
	w.b = append(w.b, '[')
	for i, s := range steps {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, '{')
		w.putStr("name", s.Name)
		w.putStr("outcome", s.Outcome)
		w.str("detail", s.Detail)
		w.close()
	}
	w.b = append(w.b, ']')
}

func (w *gw) profile(name string, p *domain.Profile) {
	w.open(name)
	w.putStr("profile", p.Profile)
	w.putFlag("network", p.Network)
	w.str("network_mode", p.NetworkMode)
	w.strs("exec", p.Exec)
	w.strs("read", p.Read)
	w.strs("write", p.Write)
	w.strs("cache", p.Cache)
	w.close()
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
