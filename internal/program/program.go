// Package program knows what running a program file takes.
package program

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
)

// Exec lists what executing path needs the right to execute: the
// program itself, its ELF interpreter (the dynamic loader the kernel opens
// for execution) or its #! interpreter (and that one's loader). Unreadable or
// unusual files give just the program: the kernel then refuses what else
// they try, which is the point.
func Exec(path string) []string {
	out := []string{path}
	seen := map[string]bool{path: true}
	for i := 0; i < 3 && path != ""; i++ {
		next := interpreterOf(path)
		if next == "" || seen[next] {
			break
		}
		if real, err := filepath.EvalSymlinks(next); err == nil {
			next = real
		}
		seen[next] = true
		out = append(out, next)
		path = next
	}
	return out
}

func interpreterOf(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := bufio.NewReader(bytes.NewReader(head[2:])).ReadLine()
		fields := strings.Fields(string(line))
		if len(fields) > 0 && filepath.IsAbs(fields[0]) {
			return fields[0]
		}
		return ""
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return ""
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				return string(bytes.TrimRight(b, "\x00"))
			}
		}
	}
	return ""
}
