package grammar

import (
	"errors"
	"fmt"
	"strings"
)

func Errf(f string, a ...any) error { return errors.New(fmt.Sprintf(f, a...)) }

func Set(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

func Contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// IntoName is the name a source gets inside a destination directory.
func (p *Parsed) IntoName(src string) string {
	if p.KeepParents {
		return src
	}
	return BaseName(src)
}
