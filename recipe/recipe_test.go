package recipe

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestParseReportsEveryPlace(t *testing.T) {
	_, err := Parse([]byte(`schema_version: "1"
name: Bad_Name
title: x
limits: {timeout_seconds: 0, output_bytes: 4096}
steps:
  - name: no argv
  - name: number
    argv: [head, -n, 5]
  - name: escapes
    argv: [ls]
    dir: ../up
`))
	if err == nil {
		t.Fatal("a bad recipe parsed")
	}
	msg := err.Error()
	for _, want := range []string{"name:", "limits/timeout_seconds:", "steps/0:", `steps/1/argv/2: got number, want string (quote it in YAML: "15"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("problems %q do not name %q", msg, want)
		}
	}
	_, err = Parse([]byte(`{"schema_version": "1", "name": "ok", "title": "t", "limits": {"timeout_seconds": 5, "output_bytes": 4096},
 "steps": [{"name": "up", "argv": ["ls"], "dir": "a/../../b"}]}`))
	if err == nil || !strings.Contains(err.Error(), "step 1 (up): dir") {
		t.Fatalf("a step leaving the run directory: %v", err)
	}
}

func TestParseJSONAndYAMLAgree(t *testing.T) {
	y, err := Parse([]byte("schema_version: \"1\"\nname: a\ntitle: A\nlimits: {timeout_seconds: 5, output_bytes: 2048}\nsteps:\n  - {name: l, argv: [ls, -la], ok_exit_codes: [0, 1]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := Parse([]byte(`{"schema_version":"1","name":"a","title":"A","limits":{"timeout_seconds":5,"output_bytes":2048},"steps":[{"name":"l","argv":["ls","-la"],"ok_exit_codes":[0,1]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(y, j) {
		t.Fatalf("YAML %v != JSON %v", y, j)
	}
	if !OK(y.Steps[0], 1) || OK(y.Steps[0], 2) {
		t.Fatal("ok_exit_codes not honoured")
	}
}
