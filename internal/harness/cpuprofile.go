package harness

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// CPUProfile is what a benchmark needs of a Go CPU profile (the gzipped
// profile.proto that /debug/pprof/profile serves): each sample's stack, as
// function names from the leaf out (inlined calls expanded), and its CPU
// time in nanoseconds.
type CPUProfile struct {
	Samples []ProfileSample
	Total   int64 // nanoseconds over all samples
}

// ProfileSample is one stack and the CPU time it was seen in.
type ProfileSample struct {
	Stack []string // leaf first
	Nanos int64
}

// ParseCPUProfile decodes a gzipped CPU profile. Only the parts of
// profile.proto a CPU profile's attribution needs are read: sample types,
// samples, locations (with their inlined lines), functions and strings.
func ParseCPUProfile(gz []byte) (*CPUProfile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: not gzip (%v): fetch /debug/pprof/profile, not ?debug=1", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	var d profDecoder
	if err := d.message(raw, d.profileField); err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return d.resolve()
}

type rawSample struct {
	locs   []uint64
	values []int64
}

type profDecoder struct {
	types     []int64 // string index of each sample type
	samples   []rawSample
	locations map[uint64][]uint64 // location id -> function ids, innermost first
	functions map[uint64]int64    // function id -> string index of its name
	strs      []string
	// scratch for the message being decoded
	loc   []uint64
	locID uint64
	fnID  uint64
	fnStr int64
}

// message walks the fields of one message, handing each to f.
func (d *profDecoder) message(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return protowire.ParseError(k)
		}
		b = b[k:]
		var v []byte
		var n uint64
		switch typ {
		case protowire.VarintType:
			n, k = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, k = protowire.ConsumeBytes(b)
		default:
			k = protowire.ConsumeFieldValue(num, typ, b)
		}
		if k < 0 {
			return protowire.ParseError(k)
		}
		b = b[k:]
		if err := f(num, typ, v, n); err != nil {
			return err
		}
	}
	return nil
}

// varints reads a repeated integer field, packed or not.
func varints(typ protowire.Type, v []byte, n uint64, out *[]uint64) error {
	if typ == protowire.VarintType {
		*out = append(*out, n)
		return nil
	}
	for len(v) > 0 {
		x, k := protowire.ConsumeVarint(v)
		if k < 0 {
			return protowire.ParseError(k)
		}
		*out = append(*out, x)
		v = v[k:]
	}
	return nil
}

func (d *profDecoder) profileField(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
	switch num {
	case 1: // sample_type
		var t uint64
		err := d.message(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) error {
			if num == 1 {
				t = n
			}
			return nil
		})
		d.types = append(d.types, int64(t))
		return err
	case 2: // sample
		var s rawSample
		err := d.message(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
			switch num {
			case 1:
				return varints(typ, v, n, &s.locs)
			case 2:
				var vals []uint64
				err := varints(typ, v, n, &vals)
				for _, x := range vals {
					s.values = append(s.values, int64(x))
				}
				return err
			}
			return nil
		})
		d.samples = append(d.samples, s)
		return err
	case 4: // location
		d.loc, d.locID = nil, 0
		err := d.message(v, d.locationField)
		if d.locations == nil {
			d.locations = map[uint64][]uint64{}
		}
		d.locations[d.locID] = d.loc
		return err
	case 5: // function
		d.fnID, d.fnStr = 0, 0
		err := d.message(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) error {
			switch num {
			case 1:
				d.fnID = n
			case 2:
				d.fnStr = int64(n)
			}
			return nil
		})
		if d.functions == nil {
			d.functions = map[uint64]int64{}
		}
		d.functions[d.fnID] = d.fnStr
		return err
	case 6: // string_table
		if typ != protowire.BytesType {
			return errors.New("string_table entry is not bytes")
		}
		d.strs = append(d.strs, string(v))
	}
	return nil
}

func (d *profDecoder) locationField(num protowire.Number, _ protowire.Type, v []byte, n uint64) error {
	switch num {
	case 1:
		d.locID = n
	case 4: // line: function_id is its field 1
		return d.message(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) error {
			if num == 1 {
				d.loc = append(d.loc, n)
			}
			return nil
		})
	}
	return nil
}

// resolve names every sample's frames and picks the CPU-time value.
func (d *profDecoder) resolve() (*CPUProfile, error) {
	str := func(i int64) string {
		if i < 0 || int(i) >= len(d.strs) {
			return "?"
		}
		return d.strs[i]
	}
	col := -1
	for i, t := range d.types {
		if s := str(t); s == "cpu" || s == "nanoseconds" {
			col = i
		}
	}
	if col < 0 {
		return nil, fmt.Errorf("cpu profile: no cpu sample type among %d types: is this a CPU profile?", len(d.types))
	}
	p := &CPUProfile{}
	for _, s := range d.samples {
		if col >= len(s.values) {
			continue
		}
		var stack []string
		for _, l := range s.locs {
			for _, fn := range d.locations[l] {
				stack = append(stack, str(d.functions[fn]))
			}
		}
		p.Samples = append(p.Samples, ProfileSample{Stack: stack, Nanos: s.values[col]})
		p.Total += s.values[col]
	}
	return p, nil
}

// ProfileRule names a share of a profile: a sample belongs to the first
// rule, in order, any of whose Prefixes starts a frame of its stack,
// searching the whole stack for each rule in turn.
type ProfileRule struct {
	Name     string
	Prefixes []string
}

// Attribute splits the profile's CPU time among rules (see ProfileRule);
// what no rule names goes to other. It returns nanoseconds per rule name,
// other under "other".
func (p *CPUProfile) Attribute(rules []ProfileRule) map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.Samples {
		out[ruleOf(s.Stack, rules)] += s.Nanos
	}
	return out
}

func ruleOf(stack []string, rules []ProfileRule) string {
	for _, r := range rules {
		for _, f := range stack {
			for _, pre := range r.Prefixes {
				if strings.HasPrefix(f, pre) {
					return r.Name
				}
			}
		}
	}
	return "other"
}
