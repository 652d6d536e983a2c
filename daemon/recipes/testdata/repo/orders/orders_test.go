package orders

import "testing"

func TestParseOrder(t *testing.T) {
	o, err := Parse("A1 x 3")
	if err != nil || o.Qty != 3 {
		t.Fatalf("Parse: %v %v", o, err)
	}
}

func BenchmarkParseOrder(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_, _ = Parse("A1 x 3")
	}
}

func FuzzParseOrder(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) { _, _ = Parse(s) })
}
