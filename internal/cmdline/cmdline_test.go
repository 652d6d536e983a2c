package cmdline

import (
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	ok := []struct {
		in   string
		want []string
	}{
		{"ls -la", []string{"ls", "-la"}},
		{`rg 'a|b' src`, []string{"rg", "a|b", "src"}},
		{`echo "a b" c\ d`, []string{"echo", "a b", "c d"}},
		{`echo "q\"uote" 'it''s'`, []string{"echo", `q"uote`, "its"}},
		{`printf '%s\n' x`, []string{"printf", `%s\n`, "x"}},
		{"  a\t b  ", []string{"a", "b"}},
		{`echo ""`, []string{"echo", ""}},
		{"git log a#b", []string{"git", "log", "a#b"}},
		{"echo *.go ~", []string{"echo", "*.go", "~"}},
	}
	for _, c := range ok {
		got, err := Split(c.in)
		if err != nil || strings.Join(got, "\x00") != strings.Join(c.want, "\x00") {
			t.Errorf("Split(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	bad := map[string]string{
		"ls | sh": "no pipes", "a && b": "operator", "a; b": "operator", "a > f": "operator", "a < f": "operator",
		"echo $HOME": "expansion", `echo "$HOME"`: "expansion", "echo `id`": "substitution", "(ls)": "operator",
		"ls\nid": "newline", "ls # c": "comment", "'open": "unterminated", `"open`: "unterminated", "x\\": "backslash", "": "empty", "   ": "empty",
	}
	for in, want := range bad {
		if _, err := Split(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Split(%q) err = %v; want %q", in, err, want)
		}
	}
}

func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{"ls -la", `rg 'a|b'`, `echo "x\"y"`, "a | b", "$(id)", "'unterminated", `a\ b`, "x\n", "#c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := Split(s)
		if err == nil {
			if len(w) == 0 {
				t.Fatal("no words and no error")
			}
			// re-quoting and splitting again is the identity
			w2, err := Split(Quote(w))
			if err != nil || strings.Join(w2, "\x00") != strings.Join(w, "\x00") {
				t.Fatalf("round trip %q -> %q -> %q (%v)", s, w, w2, err)
			}
		}
	})
}
