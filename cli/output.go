package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
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
	if a.output == "json" {
		var buf any
		_ = json.Unmarshal(raw, &buf)
		out, _ := json.MarshalIndent(buf, "", "  ")
		_, err = fmt.Fprintln(a.stdout, string(out))
		return true, err
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return true, err
	}
	out, err := yaml.Marshal(tree)
	if err != nil {
		return true, err
	}
	_, err = a.stdout.Write(out)
	return true, err
}

func toJSON(v any) ([]byte, error) {
	if m, ok := v.(proto.Message); ok {
		return pj.Marshal(m)
	}
	return json.Marshal(v)
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
