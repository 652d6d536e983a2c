package schemacheck

import "testing"

// A schema that uses a keyword the interpreter does not know does not
// compile: the schema files cannot outgrow it unnoticed.
func TestCompileRefusesUnknownKeywords(t *testing.T) {
	for _, doc := range []string{
		`{"type":"object","patternProperties":{"x":{}}}`,
		`{"properties":{"a":{"type":"string","format":"email"}}}`,
		`{"additionalProperties":true}`,
		`{"$ref":"https://example.com/x.json"}`,
		`{"$ref":"#/$defs/missing"}`,
		`{"oneOf":[{}]}`,
	} {
		if _, err := Compile([]byte(doc)); err == nil {
			t.Errorf("%s compiled", doc)
		}
	}
}

// Every place that is wrong is reported, each with its JSON pointer.
func TestValidateReportsEveryPlace(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","required":["a","b"],"properties":{
		"a":{"type":"array","minItems":1,"maxItems":2,"uniqueItems":true,"prefixItems":[{"type":"string","minLength":1}],"items":{"type":"integer","minimum":0,"maximum":9}},
		"c":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string][]string{
		`{"a":["x",1],"b":0}`:      nil,
		`{"a":["",10,10]}`:         {`"/": missing property "b"`, `"/a": at most 2 items, but got 3`, `"/a": items 1 and 2 are equal`, `"/a/0": length must be >= 1, but got 0`, `"/a/1": must be <= 9, but got 10`, `"/a/2": must be <= 9, but got 10`},
		`{"a":[1],"b":0,"c":5}`:    {`"/a/0": got number, want string`, `"/c": got number, want string`},
		`{"a":[],"b":null}`:        {`"/a": at least 1 items, but got 0`},
		`{"a":["x",1.5,-1],"b":1}`: {`"/a": at most 2 items, but got 3`, `"/a/1": got number, want integer`, `"/a/2": must be >= 0, but got -1`},
	} {
		wantProblems(t, s, doc, want)
	}
}

// A closed object reports an additional property among the others' problems
// in key order, whether or not it has one (the check walks the schema's
// properties and goes over the instance's keys only when one is extra).
func TestValidateClosedObjectInKeyOrder(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"},"c":{"type":"string"}},
		"allOf":[{"if":{"properties":{"a":{"const":"x"}}},"then":{"properties":{"c":{"const":"y"}}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string][]string{
		`{"a":"x","c":"y"}`:       nil,
		`{"a":"x"}`:               nil,
		`{"a":1,"c":2}`:           {`"/a": got number, want string`, `"/c": got number, want string`},
		`{"a":1,"b":0,"c":2}`:     {`"/a": got number, want string`, `"/": additional property "b" is not allowed`, `"/c": got number, want string`},
		`{"a":"x","c":"z","d":0}`: {`"/": additional property "d" is not allowed`, `"/c": value must be "y"`},
	} {
		wantProblems(t, s, doc, want)
	}
}

// wantProblems checks that doc has exactly the problems want, in order.
func wantProblems(t *testing.T, s *Schema, doc string, want []string) {
	t.Helper()
	inst, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range s.Validate(inst) {
		got = append(got, e.Error())
	}
	if len(got) != len(want) {
		t.Errorf("%s: %q, want %q", doc, got, want)
		return
	}
	for i := range got {
		if got[i] != "at "+want[i] {
			t.Errorf("%s: problem %d is %q, want %q", doc, i, got[i], "at "+want[i])
		}
	}
}
