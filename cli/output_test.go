package cli

import (
	"fmt"
	"strings"
	"testing"
)

// A listing verb prints one row per item under its header, or, with no
// items, only the sentence that says what to do.
func TestListTable(t *testing.T) {
	var b strings.Builder
	if err := listTable(&b, []int{}, "no numbers (add one)", []string{"N", "SQUARE"}, func(n int) []string { return nil }); err != nil || b.String() != "no numbers (add one)\n" {
		t.Errorf("no items: %q %v", b.String(), err)
	}
	b.Reset()
	if err := listTable(&b, []int{2, 10}, "no numbers", []string{"N", "SQUARE"}, func(n int) []string { return []string{fmt.Sprint(n), fmt.Sprint(n * n)} }); err != nil {
		t.Fatal(err)
	}
	if want := "N   SQUARE\n2   4\n10  100\n"; b.String() != want {
		t.Errorf("two items:\n%q\nwant\n%q", b.String(), want)
	}
}
