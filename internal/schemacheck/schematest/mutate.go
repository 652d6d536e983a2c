// Package schematest makes broken documents from a valid one, for tests
// that hold internal/schemacheck to a general JSON Schema validator.
package schematest

import (
	"fmt"
	"sort"
	"strings"
)

// DeepCopy copies a decoded JSON value.
func DeepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = DeepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = DeepCopy(e)
		}
		return a
	}
	return v
}

// Mutations are documents derived from a valid one: every member (at any
// depth) replaced by values of every kind, removed, and every object given
// an unknown member.
func Mutations(doc map[string]any, extra ...any) map[string]map[string]any {
	values := []any{nil, true, false, 0, -1, 1, 1.5, 60000, "", "x", "[REDACTED FOR SHARING]", "SIGKILL",
		strings.Repeat("a", 64), strings.Repeat("A", 64), strings.Repeat("a", 16), strings.Repeat("a", 128), strings.Repeat("x", 129),
		"2026-03-01T12:00:00Z", "2026-03-01t12:00:00.5z", "2026-03-01T12:00:00+01:00", "2016-12-31T23:59:60Z", "2016-12-31T22:59:60-01:00",
		"2026-02-30T12:00:00Z", "2026-03-01 12:00:00Z", "2026-03-01T12:00:00", "2026-03-01T24:00:00Z", "2026-03-01T12:00:60Z",
		"succeeded", "failed", "denied", "blocked", "expired", "killed", "allow", "ask", "deny", "operator", "god", "unix", "read-only",
		[]any{}, []any{"x"}, []any{1}, map[string]any{}}
	values = append(values, extra...)
	out := map[string]map[string]any{}
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		name := strings.Join(path, "/")
		m := DeepCopy(doc).(map[string]any)
		at(m, path)["unknown_member"] = 1
		out[name+"/+unknown"] = m
		for _, k := range keys {
			p := append(append([]string(nil), path...), k)
			m := DeepCopy(doc).(map[string]any)
			delete(at(m, path), k)
			out[strings.Join(p, "/")+" removed"] = m
			for i, val := range values {
				m := DeepCopy(doc).(map[string]any)
				at(m, path)[k] = DeepCopy(val)
				out[fmt.Sprintf("%s = #%d %v", strings.Join(p, "/"), i, val)] = m
			}
			walk(p, obj[k])
		}
	}
	walk(nil, doc)
	return out
}

func at(m map[string]any, path []string) map[string]any {
	for _, k := range path {
		m = m[k].(map[string]any)
	}
	return m
}
