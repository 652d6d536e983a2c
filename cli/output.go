package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

var pj = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false}

// printData writes v as JSON or YAML when asked; it returns false for table
// output so the verb prints its own table. v may be a proto message or any
// JSON-encodable value.
func (a *app) printData(v any) (bool, error) {
	if a.output == "table" {
		return false, nil
	}
	raw, err := toJSON(v)
	if err != nil {
		return true, err
	}
	tree, err := decodeTree(raw)
	if err != nil {
		return true, err
	}
	if a.output == "json" {
		out, _ := json.MarshalIndent(tree, "", "  ")
		_, err = fmt.Fprintln(a.stdout, string(out))
		return true, err
	}
	out, err := yaml.Marshal(yamlNumbers(tree))
	if err != nil {
		return true, err
	}
	_, err = a.stdout.Write(out)
	return true, err
}

// yamlNumbers turns decodeTree's json.Number (a string to YAML) into numbers.
func yamlNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = yamlNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = yamlNumbers(e)
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// toJSON is v as termctl prints it (-o json, -o yaml). A proto message goes
// through protojson and then shapeJSON, the one place that decides the
// shape of termctl's machine-readable output.
func toJSON(v any) ([]byte, error) {
	if m, ok := v.(proto.Message); ok {
		raw, err := pj.Marshal(m)
		if err != nil {
			return nil, err
		}
		return shapeJSON(m.ProtoReflect().Descriptor(), raw)
	}
	return json.Marshal(v)
}

// decodeTree decodes JSON keeping numbers exact (int64 ids and byte counts
// stay whole).
func decodeTree(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	err := dec.Decode(&tree)
	return tree, err
}

// shapeJSON rewrites protojson's text of a message of type md into the
// shape termctl prints: an enum value is its short lowercase word, as the
// tables and `termctl run` print it (PLAN_STATE_AWAITING_APPROVAL is
// "awaiting_approval", VERDICT_ASK "ask", MODE_CONFIRM "confirm"), and a
// 64-bit integer is a JSON number (protojson writes them as strings). Field
// names are the proto names. Well-known types (timestamps as RFC 3339
// strings, durations, structs) keep protojson's form. The gateway's REST
// API is not affected: it keeps protojson's canonical spelling.
func shapeJSON(md protoreflect.MessageDescriptor, raw []byte) ([]byte, error) {
	tree, err := decodeTree(raw)
	if err != nil {
		return nil, err
	}
	if obj, ok := tree.(map[string]any); ok {
		shapeMessage(md, obj)
	}
	return json.Marshal(tree)
}

func shapeMessage(md protoreflect.MessageDescriptor, obj map[string]any) {
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return
	}
	fields := md.Fields()
	for k, v := range obj {
		fd := fields.ByName(protoreflect.Name(k))
		if fd == nil {
			fd = fields.ByJSONName(k)
		}
		if fd == nil {
			continue
		}
		switch {
		case fd.IsMap():
			if m, ok := v.(map[string]any); ok {
				for mk, mv := range m {
					m[mk] = shapeValue(fd.MapValue(), mv)
				}
			}
		case fd.IsList():
			if l, ok := v.([]any); ok {
				for i, e := range l {
					l[i] = shapeValue(fd, e)
				}
			}
		default:
			obj[k] = shapeValue(fd, v)
		}
	}
}

func shapeValue(fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if s, ok := v.(string); ok && fd.Enum().FullName() != "google.protobuf.NullValue" {
			return enumJSONWord(fd.Enum(), s)
		}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s, ok := v.(string); ok {
			return json.Number(s)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if obj, ok := v.(map[string]any); ok {
			shapeMessage(fd.Message(), obj)
		}
	}
	return v
}

// enumJSONWord is an enum value's name without its type's prefix, in lower
// case: PLAN_STATE_AWAITING_APPROVAL of PlanState is "awaiting_approval".
func enumJSONWord(ed protoreflect.EnumDescriptor, name string) string {
	var prefix strings.Builder
	for i, r := range string(ed.Name()) {
		if i > 0 && unicode.IsUpper(r) {
			prefix.WriteByte('_')
		}
		prefix.WriteRune(unicode.ToUpper(r))
	}
	prefix.WriteByte('_')
	return strings.ToLower(strings.TrimPrefix(name, prefix.String()))
}

// listTable prints a listing verb's items as a table, one row each, or
// when there are none the sentence none (what to do about it).
func listTable[T any](w io.Writer, items []T, none string, header []string, row func(T) []string) error {
	if len(items) == 0 {
		_, err := fmt.Fprintln(w, none)
		return err
	}
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		rows = append(rows, row(it))
	}
	return table(w, header, rows)
}

// table writes aligned rows.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(header) > 0 {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// kv writes "key: value" lines aligned.
func kv(w io.Writer, pairs ...string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], pairs[i+1])
	}
	return tw.Flush()
}
