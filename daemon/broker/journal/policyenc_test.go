package journal

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/termd/termd/daemon/policy"
)

// fillGo sets v (a Go value of the policy's types) from f's bytes, by
// reflection: every exported field, recursively, when f.every (to a value
// that is not its zero), else each left zero, nil or empty, or set to an
// edge value (the strings of filler.str, the extremes of each integer).
func (f *filler) fillGo(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(f.every || f.next()&1 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x := int64(math.MaxInt64)
		if !f.every {
			x = []int64{0, 1, -1, math.MinInt64, math.MaxInt64, int64(f.u64())}[f.next()%6]
		}
		v.SetInt(x) // truncated to the kind's size
		if v.Int() == 0 && f.every {
			v.SetInt(-1)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x := uint64(math.MaxUint64)
		if !f.every {
			x = []uint64{0, 1, math.MaxUint64, f.u64()}[f.next()%4]
		}
		v.SetUint(x & (1<<(v.Type().Bits()-1)<<1 - 1))
	case reflect.Slice, reflect.Map:
		if !f.every && f.next()%3 == 0 {
			return // nil
		}
		n := 2
		if !f.every {
			n = int(f.next() % 4) // 0: empty, not nil
		}
		if v.Kind() == reflect.Map {
			v.Set(reflect.MakeMap(v.Type()))
			for range n {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				f.fillGo(k)
				f.fillGo(e)
				v.SetMapIndex(k, e)
			}
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			f.fillGo(v.Index(i))
		}
	case reflect.Pointer:
		if f.every || f.next()%2 == 1 {
			v.Set(reflect.New(v.Type().Elem()))
			f.fillGo(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fillGo(v.Field(i))
			}
		}
	default:
		panic("fillGo: no value for a " + v.Kind().String())
	}
}

// checkPolicyEncoding holds appendRequest and appendDecision to the bytes
// json.Marshal writes, which replay reads back with json.Unmarshal.
func checkPolicyEncoding(t *testing.T, req *policy.Request, dec *policy.Decision) {
	t.Helper()
	for _, c := range []struct {
		got []byte
		v   any
	}{{appendRequest(nil, req), req}, {appendDecision(nil, dec), dec}} {
		want, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.got, want) {
			t.Fatalf("the direct encoding of %T wrote\n%s\njson.Marshal\n%s", c.v, c.got, want)
		}
	}
}

func checkPolicyFilled(t *testing.T, data []byte) {
	t.Helper()
	var req policy.Request
	var dec policy.Decision
	f := &filler{data: data}
	f.fillGo(reflect.ValueOf(&req).Elem())
	f.fillGo(reflect.ValueOf(&dec).Elem())
	checkPolicyEncoding(t, &req, &dec)
}

// TestPolicyEncodingIsJSONMarshal: a plan record's request and decision,
// written directly, are json.Marshal's bytes, with every field set (a field
// added to them is set here and fails this until it is written), empty,
// and filled from thousands of random inputs.
func TestPolicyEncodingIsJSONMarshal(t *testing.T) {
	var req policy.Request
	var dec policy.Decision
	every := &filler{every: true}
	every.fillGo(reflect.ValueOf(&req).Elem())
	every.fillGo(reflect.ValueOf(&dec).Elem())
	checkPolicyEncoding(t, &req, &dec)
	checkPolicyEncoding(t, &policy.Request{}, &policy.Decision{})
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 36))
	data := make([]byte, 2048)
	for range 3000 {
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		checkPolicyFilled(t, data)
	}
}
