package policy

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

func reflectTypeOf(v any) reflect.Type { return reflect.TypeOf(v) }

// checkKnown walks a YAML node against a Go type and refuses unknown keys,
// duplicate keys, aliases and tags that would smuggle data past the schema.
func checkKnown(file string, n *yaml.Node, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		return &LoadError{File: file, Line: n.Line, Reason: "YAML aliases are not allowed in policy files"}
	}
	if n.Anchor != "" {
		return &LoadError{File: file, Line: n.Line, Reason: "YAML anchors are not allowed in policy files"}
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return &LoadError{File: file, Line: n.Line, Reason: fmt.Sprintf("expected a mapping, got %s", kindName(n))}
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			fields[tag] = f.Type
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return &LoadError{File: file, Line: k.Line, Reason: "mapping keys must be plain strings"}
			}
			ft, ok := fields[k.Value]
			if !ok {
				return &LoadError{File: file, Line: k.Line, Reason: fmt.Sprintf("unknown key %q", k.Value)}
			}
			if seen[k.Value] {
				return &LoadError{File: file, Line: k.Line, Reason: fmt.Sprintf("duplicate key %q", k.Value)}
			}
			seen[k.Value] = true
			if err := checkKnown(file, n.Content[i+1], ft); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil // "programs:" with nothing under it
		}
		if n.Kind != yaml.MappingNode {
			return &LoadError{File: file, Line: n.Line, Reason: fmt.Sprintf("expected a mapping, got %s", kindName(n))}
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return &LoadError{File: file, Line: k.Line, Reason: "mapping keys must be plain strings"}
			}
			if seen[k.Value] {
				return &LoadError{File: file, Line: k.Line, Reason: fmt.Sprintf("duplicate key %q", k.Value)}
			}
			seen[k.Value] = true
			if err := checkKnown(file, n.Content[i+1], t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return &LoadError{File: file, Line: n.Line, Reason: fmt.Sprintf("expected a list, got %s", kindName(n))}
		}
		for _, c := range n.Content {
			if err := checkKnown(file, c, t.Elem()); err != nil {
				return err
			}
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return &LoadError{File: file, Line: n.Line, Reason: fmt.Sprintf("expected a scalar, got %s", kindName(n))}
		}
		if t.Kind() == reflect.String && n.Tag != "!!str" && n.Tag != "!!null" && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
			// Unquoted non-strings (true, 12, 1.5) where a string is expected
			// are almost always mistakes (e.g. `decision: yes`).
			if n.Tag == "!!bool" {
				return &LoadError{File: file, Line: n.Line, Reason: fmt.Sprintf("expected a string, got boolean %q (quote it)", n.Value)}
			}
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "an alias"
}
