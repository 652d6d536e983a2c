// Package schemacheck checks JSON documents against the JSON Schema files
// termd ships (receipts, recipes) with a small interpreter of exactly the
// keywords they use, compiled from the schema file on first use. A general
// validator (santhosh-tekuri/jsonschema, now only in the tests, which check
// this one against it) did 21,000 allocations in its package
// initialisation: a third of termctl's start-up. A schema that uses a
// keyword this interpreter does not know fails to compile, so the schema
// files cannot outgrow it silently.
package schemacheck

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// node is one compiled schema.
type node struct {
	types      []string // "type"
	hasConst   bool
	constVal   any
	enum       []any
	required   []string
	props      map[string]*node
	propNames  []string // props' names, sorted
	closed     bool     // additionalProperties: false
	items      *node
	anyOf      []*node
	allOf      []*node
	ifN, thenN *node
	not        *node
	minimum    *big.Rat
	maximum    *big.Rat
	minItems   int // -1 = none
	maxItems   int // -1 = none
	unique     bool
	prefix     []*node
	minLength  int // -1 = none
	maxLength  int // -1 = none
	pattern    *regexp.Regexp
	dateTime   bool // format: date-time (asserted)
	ref        string
	root       *compiledRoot
}

type compiledRoot struct {
	top  *node
	defs map[string]*node
}

// Schema is a compiled schema.
type Schema struct{ root *compiledRoot }

// Compile compiles a schema document.
func Compile(doc []byte) (*Schema, error) {
	r, err := compileSchema(doc)
	if err != nil {
		return nil, err
	}
	return &Schema{root: r}, nil
}

// Validate checks inst (as Decode returns it) and returns every problem,
// each with its place (a JSON pointer); none when it matches.
func (s *Schema) Validate(inst any) []*Error {
	var out []*Error
	s.root.top.check(inst, "", &out)
	return out
}

// Decode parses a JSON document into the values Validate reads: objects
// as map[string]any, arrays as []any, numbers as json.Number.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func compileSchema(doc []byte) (*compiledRoot, error) {
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	root := &compiledRoot{defs: map[string]*node{}}
	if defs, ok := v["$defs"].(map[string]any); ok {
		for name, d := range defs {
			n, err := root.compile(d, "#/$defs/"+name)
			if err != nil {
				return nil, err
			}
			root.defs["#/$defs/"+name] = n
		}
	}
	top, err := root.compile(v, "#")
	if err != nil {
		return nil, err
	}
	root.top = top
	for _, n := range root.defs {
		if err := root.checkRefs(n); err != nil {
			return nil, err
		}
	}
	return root, root.checkRefs(top)
}

func (r *compiledRoot) checkRefs(n *node) error {
	if n == nil {
		return nil
	}
	if n.ref != "" && r.defs[n.ref] == nil {
		return fmt.Errorf("schema: $ref %q does not name a $defs entry", n.ref)
	}
	for _, c := range n.props {
		if err := r.checkRefs(c); err != nil {
			return err
		}
	}
	for _, list := range [][]*node{n.anyOf, n.allOf, n.prefix, {n.items, n.ifN, n.thenN, n.not}} {
		for _, c := range list {
			if err := r.checkRefs(c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *compiledRoot) compile(v any, at string) (*node, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema %s: a schema must be an object", at)
	}
	c := &schemaCompiler{r: r, m: m, at: at, n: &node{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1, root: r}}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := c.keyword(k, m[k]); err != nil {
			return nil, err
		}
	}
	if c.n.thenN != nil && c.n.ifN == nil {
		return nil, fmt.Errorf("schema %s: then without if", at)
	}
	return c.n, nil
}

// schemaCompiler compiles the keywords of one schema object m, found at at,
// into n.
type schemaCompiler struct {
	r  *compiledRoot
	m  map[string]any
	at string
	n  *node
}

// keyword compiles one keyword and its value.
func (c *schemaCompiler) keyword(k string, val any) error {
	n, at := c.n, c.at
	switch k {
	case "$schema", "$id", "title", "description", "$defs":
		// Annotations; $defs are compiled by compileSchema (at the root only).
		if k == "$defs" && at != "#" {
			return fmt.Errorf("schema %s: $defs only at the root", at)
		}
	case "type":
		return c.types(val)
	case "const":
		n.hasConst, n.constVal = true, val
	case "enum":
		arr, ok := val.([]any)
		if !ok {
			return fmt.Errorf("schema %s/enum: want an array", at)
		}
		n.enum = arr
	case "required":
		arr, ok := val.([]any)
		if !ok {
			return fmt.Errorf("schema %s/required: want an array", at)
		}
		for _, e := range arr {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("schema %s/required: want strings", at)
			}
			n.required = append(n.required, s)
		}
	case "properties":
		return c.properties(val)
	case "additionalProperties":
		if b, ok := val.(bool); !ok || b {
			return fmt.Errorf("schema %s/additionalProperties: only false is supported", at)
		}
		n.closed = true
	case "items", "if", "then", "not":
		return c.sub(k, map[string]**node{"items": &n.items, "if": &n.ifN, "then": &n.thenN, "not": &n.not}[k])
	case "anyOf", "allOf", "prefixItems":
		return c.list(k, map[string]*[]*node{"anyOf": &n.anyOf, "allOf": &n.allOf, "prefixItems": &n.prefix}[k])
	case "minimum", "maximum":
		return c.number(k, map[string]**big.Rat{"minimum": &n.minimum, "maximum": &n.maximum}[k])
	case "minItems", "maxItems", "minLength", "maxLength":
		return c.length(k, map[string]*int{"minItems": &n.minItems, "maxItems": &n.maxItems, "minLength": &n.minLength, "maxLength": &n.maxLength}[k])
	case "uniqueItems":
		b, ok := val.(bool)
		if !ok {
			return fmt.Errorf("schema %s/uniqueItems: want a boolean", at)
		}
		n.unique = b
	case "pattern":
		s, ok := val.(string)
		if !ok {
			return fmt.Errorf("schema %s/pattern: want a string", at)
		}
		var err error
		if n.pattern, err = regexp.Compile(s); err != nil {
			return fmt.Errorf("schema %s/pattern: %w", at, err)
		}
	case "format":
		if val != "date-time" {
			return fmt.Errorf("schema %s/format: only date-time is supported, not %v", at, val)
		}
		n.dateTime = true
	case "$ref":
		s, ok := val.(string)
		if !ok || !strings.HasPrefix(s, "#/$defs/") {
			return fmt.Errorf("schema %s/$ref: only local #/$defs/ references are supported", at)
		}
		n.ref = s
	default:
		return fmt.Errorf("schema %s: keyword %q is not supported by termd's receipt validator (receipt/schemacheck.go)", at, k)
	}
	return nil
}

// types compiles "type": one type name or an array of them.
func (c *schemaCompiler) types(val any) error {
	n, at := c.n, c.at
	switch t := val.(type) {
	case string:
		n.types = []string{t}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("schema %s/type: want strings", at)
			}
			n.types = append(n.types, s)
		}
	default:
		return fmt.Errorf("schema %s/type: want a string or an array", at)
	}
	for _, t := range n.types {
		switch t {
		case "object", "array", "string", "integer", "number", "boolean", "null":
		default:
			return fmt.Errorf("schema %s/type: unknown type %q", at, t)
		}
	}
	return nil
}

// properties compiles "properties": a schema a named member.
func (c *schemaCompiler) properties(val any) error {
	n := c.n
	pm, ok := val.(map[string]any)
	if !ok {
		return fmt.Errorf("schema %s/properties: want an object", c.at)
	}
	n.props = map[string]*node{}
	for name, ps := range pm {
		var err error
		if n.props[name], err = c.r.compile(ps, c.at+"/properties/"+name); err != nil {
			return err
		}
		n.propNames = append(n.propNames, name)
	}
	sort.Strings(n.propNames)
	return nil
}

// sub compiles the schema under key into *dst.
func (c *schemaCompiler) sub(key string, dst **node) error {
	var err error
	*dst, err = c.r.compile(c.m[key], c.at+"/"+key)
	return err
}

// list compiles the array of schemas under key into *dst.
func (c *schemaCompiler) list(key string, dst *[]*node) error {
	arr, ok := c.m[key].([]any)
	if !ok {
		return fmt.Errorf("schema %s/%s: want an array", c.at, key)
	}
	out := make([]*node, len(arr))
	for i, e := range arr {
		s, err := c.r.compile(e, fmt.Sprintf("%s/%s/%d", c.at, key, i))
		if err != nil {
			return err
		}
		out[i] = s
	}
	*dst = out
	return nil
}

// length reads the whole number under key into *dst.
func (c *schemaCompiler) length(key string, dst *int) error {
	num, ok := c.m[key].(json.Number)
	if !ok {
		return fmt.Errorf("schema %s/%s: want a number", c.at, key)
	}
	i, err := num.Int64()
	if err != nil {
		return err
	}
	*dst = int(i)
	return nil
}

// number reads the exact number under key into *dst.
func (c *schemaCompiler) number(key string, dst **big.Rat) error {
	num, ok := c.m[key].(json.Number)
	if !ok {
		return fmt.Errorf("schema %s/%s: want a number", c.at, key)
	}
	if *dst, ok = new(big.Rat).SetString(string(num)); !ok {
		return fmt.Errorf("schema %s/%s: bad number %s", c.at, key, num)
	}
	return nil
}

// check appends to out every problem of inst at the place at.
func (n *node) check(inst any, at string, out *[]*Error) {
	if n.ref != "" {
		n.root.defs[n.ref].check(inst, at, out)
	}
	if !n.checkType(inst, at, out) {
		return
	}
	n.checkValue(inst, at, out)
	switch v := inst.(type) {
	case map[string]any:
		n.checkObject(v, at, out)
	case []any:
		n.checkArray(v, at, out)
	case string:
		n.checkString(v, at, out)
	case json.Number:
		n.checkNumber(v, at, out)
	}
	n.checkApplicators(inst, at, out)
}

// addError appends one problem at the place at.
func addError(out *[]*Error, at, format string, args ...any) {
	*out = append(*out, &Error{At: at, Problem: fmt.Sprintf(format, args...)})
}

// checkType reports whether inst has one of the node's types (any when it
// names none), adding the problem when not.
func (n *node) checkType(inst any, at string, out *[]*Error) bool {
	if len(n.types) == 0 {
		return true
	}
	for _, t := range n.types {
		if hasType(inst, t) {
			return true
		}
	}
	addError(out, at, "got %s, want %s", KindOf(inst), strings.Join(n.types, " or "))
	return false
}

// checkValue checks const and enum.
func (n *node) checkValue(inst any, at string, out *[]*Error) {
	if n.hasConst && !jsonEqual(inst, n.constVal) {
		addError(out, at, "value must be %s", show(n.constVal))
	}
	if n.enum == nil {
		return
	}
	for _, e := range n.enum {
		if jsonEqual(inst, e) {
			return
		}
	}
	words := make([]string, len(n.enum))
	for i, e := range n.enum {
		words[i] = show(e)
	}
	addError(out, at, "value must be one of %s", strings.Join(words, ", "))
}

// checkObject checks an object's required, named and additional members.
func (n *node) checkObject(v map[string]any, at string, out *[]*Error) {
	for _, k := range n.required {
		if _, ok := v[k]; !ok {
			addError(out, at, "missing property %q", k)
		}
	}
	// The properties the schema names, in name order: a receipt's
	// conditions (if/then on the whole object) name one or two of its
	// 47 members each, and sorting the instance's keys for every one
	// of them was half the cost of checking a receipt.
	start, seen := len(*out), 0
	for _, k := range n.propNames {
		if e, ok := v[k]; ok {
			seen++
			n.props[k].check(e, at+"/"+k, out)
		}
	}
	if !n.closed || seen == len(v) {
		return
	}
	// An additional property is not allowed: report every problem
	// again in the instance's key order, as before.
	*out = (*out)[:start]
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p, ok := n.props[k]
		if !ok {
			addError(out, at, "additional property %q is not allowed", k)
			continue
		}
		p.check(v[k], at+"/"+k, out)
	}
}

// checkArray checks an array's length, uniqueness and items.
func (n *node) checkArray(v []any, at string, out *[]*Error) {
	if n.minItems >= 0 && len(v) < n.minItems {
		addError(out, at, "at least %d items, but got %d", n.minItems, len(v))
	}
	if n.maxItems >= 0 && len(v) > n.maxItems {
		addError(out, at, "at most %d items, but got %d", n.maxItems, len(v))
	}
	if n.unique {
	dup:
		for i := range v {
			for j := i + 1; j < len(v); j++ {
				if jsonEqual(v[i], v[j]) {
					addError(out, at, "items %d and %d are equal", i, j)
					break dup
				}
			}
		}
	}
	for i, e := range v {
		switch {
		case i < len(n.prefix):
			n.prefix[i].check(e, fmt.Sprintf("%s/%d", at, i), out)
		case n.items != nil:
			n.items.check(e, fmt.Sprintf("%s/%d", at, i), out)
		}
	}
}

// checkString checks a string's length, pattern and format.
func (n *node) checkString(v string, at string, out *[]*Error) {
	if n.minLength >= 0 || n.maxLength >= 0 {
		l := utf8.RuneCountInString(v)
		if n.minLength >= 0 && l < n.minLength {
			addError(out, at, "length must be >= %d, but got %d", n.minLength, l)
		}
		if n.maxLength >= 0 && l > n.maxLength {
			addError(out, at, "length must be <= %d, but got %d", n.maxLength, l)
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(v) {
		addError(out, at, "%q does not match pattern %q", v, n.pattern.String())
	}
	if n.dateTime && !isDateTime(v) {
		addError(out, at, "%q is not a valid date-time (RFC 3339)", v)
	}
}

// checkNumber checks a number's bounds.
func (n *node) checkNumber(v json.Number, at string, out *[]*Error) {
	r, ok := new(big.Rat).SetString(string(v))
	if !ok {
		return
	}
	if n.minimum != nil && r.Cmp(n.minimum) < 0 {
		addError(out, at, "must be >= %s, but got %s", n.minimum.RatString(), v)
	}
	if n.maximum != nil && r.Cmp(n.maximum) > 0 {
		addError(out, at, "must be <= %s, but got %s", n.maximum.RatString(), v)
	}
}

// checkApplicators checks allOf, anyOf, if/then and not.
func (n *node) checkApplicators(inst any, at string, out *[]*Error) {
	for _, a := range n.allOf {
		a.check(inst, at, out)
	}
	if n.anyOf != nil {
		var first []*Error
		ok := false
		for _, a := range n.anyOf {
			var errs []*Error
			a.check(inst, at, &errs)
			if len(errs) == 0 {
				ok = true
				break
			}
			if first == nil {
				first = errs
			}
		}
		if !ok {
			addError(out, at, "matches none of the allowed forms (first: %v)", first[0])
		}
	}
	if n.ifN != nil && n.ifN.matches(inst, at) && n.thenN != nil {
		n.thenN.check(inst, at, out)
	}
	if n.not != nil && n.not.matches(inst, at) {
		addError(out, at, "must not be %s", describeNot(n.not))
	}
}

func (n *node) matches(inst any, at string) bool {
	var errs []*Error
	n.check(inst, at, &errs)
	return len(errs) == 0
}

func describeNot(n *node) string {
	if n.hasConst {
		return show(n.constVal)
	}
	return "of the excluded form"
}

// Error is one place where a document does not match its schema: where
// (a JSON pointer, "" for the whole document) and what.
type Error struct {
	At, Problem string
}

func (e *Error) Error() string {
	at := e.At
	if at == "" {
		at = "/"
	}
	return fmt.Sprintf("at %q: %s", at, e.Problem)
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		num, ok := v.(json.Number)
		if !ok {
			return false
		}
		r, ok := new(big.Rat).SetString(string(num))
		return ok && r.IsInt()
	}
	return false
}

// KindOf names a decoded JSON value's kind as a schema's "type" does:
// object, array, string, number, boolean or null.
func KindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case json.Number:
		return "number"
	}
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case nil:
		return "null"
	case bool:
		return "boolean"
	}
	return "number"
}

// jsonEqual is JSON Schema equality: numbers by value, objects and arrays
// member by member.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, ok1 := new(big.Rat).SetString(string(x))
		ry, ok2 := new(big.Rat).SetString(string(y))
		return ok1 && ok2 && rx.Cmp(ry) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case string, bool, nil:
		return a == b
	}
	return false
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// isDateTime is RFC 3339 date-time as JSON Schema's format asserts it:
// full-date "T" full-time, the "T" and "Z" in either case, optional
// fraction, offset Z or ±hh:mm, a leap second allowed.
func isDateTime(s string) bool {
	if len(s) < 20 {
		return false
	}
	digits := func(part string) bool {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return false
			}
		}
		return true
	}
	if !digits(s[0:4]) || s[4] != '-' || !digits(s[5:7]) || s[7] != '-' || !digits(s[8:10]) ||
		(s[10] != 'T' && s[10] != 't') || !digits(s[11:13]) || s[13] != ':' || !digits(s[14:16]) || s[16] != ':' || !digits(s[17:19]) {
		return false
	}
	rest := s[19:]
	if rest[0] == '.' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 1 {
			return false
		}
		rest = rest[i:]
	}
	switch {
	case rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && digits(rest[1:3]) && rest[3] == ':' && digits(rest[4:6]):
		if atoi2(rest[1:3]) > 23 || atoi2(rest[4:6]) > 59 {
			return false
		}
	default:
		return false
	}
	year, month, day := atoi2(s[0:2])*100+atoi2(s[2:4]), atoi2(s[5:7]), atoi2(s[8:10])
	hour, minute, sec := atoi2(s[11:13]), atoi2(s[14:16]), atoi2(s[17:19])
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || sec > 60 {
		return false
	}
	if sec == 60 {
		// A leap second happens at 23:59:60 UTC only.
		off := 0
		if len(rest) == 6 {
			off = atoi2(rest[1:3])*60 + atoi2(rest[4:6])
			if rest[0] == '-' {
				off = -off
			}
		}
		utc := ((hour*60+minute-off)%(24*60) + 24*60) % (24 * 60)
		return utc == 23*60+59
	}
	return true
}

func atoi2(s string) int { return int(s[0]-'0')*10 + int(s[1]-'0') }

func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
