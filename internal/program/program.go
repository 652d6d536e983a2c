// Package program knows what running a program file takes.
package program

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Exec lists what executing path needs the right to execute: the
// program itself, its ELF interpreter (the dynamic loader the kernel opens
// for execution) or its #! interpreter (and that one's loader). A script
// run through env (#!/usr/bin/env node) also needs what env runs: the
// first match of that name in searchPath (the PATH the program gets).
// Unreadable or unusual files give just the program: the kernel then
// refuses what else they try, which is the point.
func Exec(path string, searchPath ...string) []string {
	out := []string{path}
	seen := map[string]bool{path: true}
	add := func(next string) bool {
		if real, err := filepath.EvalSymlinks(next); err == nil {
			next = real
		}
		if seen[next] {
			return false
		}
		seen[next] = true
		out = append(out, next)
		return true
	}
	queue := []string{path}
	for i := 0; i < 6 && len(queue) > 0; i++ {
		cur := queue[0]
		queue = queue[1:]
		interp, viaEnv := interpreterOf(cur)
		if interp != "" && add(interp) {
			queue = append(queue, out[len(out)-1])
		}
		if viaEnv != "" {
			if found := lookPath(viaEnv, searchPath); found != "" && add(found) {
				queue = append(queue, out[len(out)-1])
			}
		}
	}
	return out
}

// lookPath finds name in dirs as execve through env would.
func lookPath(name string, dirs []string) string {
	if strings.Contains(name, "/") {
		return ""
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// interpreters caches interpreterOf by file version (fileKey): every plan
// and every start asks it of the program, and opening and parsing an ELF
// file each time was ~3% of termd's CPU per execution. A file changed in
// any way (written in place, replaced, touched back) has another key.
var (
	interpreters sync.Map // fileKey -> [2]string
	cached       atomic.Int64
)

const maxCached = 4096

// interpreterOf is a file's #! or ELF interpreter and, for #!/usr/bin/env
// NAME, the NAME env will run.
func interpreterOf(path string) (interp, viaEnv string) {
	if fi, err := os.Stat(path); err == nil {
		if k, ok := keyOf(path, fi); ok {
			if v, hit := interpreters.Load(k); hit {
				r := v.([2]string)
				return r[0], r[1]
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	interp, viaEnv = readInterpreter(f)
	// Kept under the version of the file that was read.
	if fi, err := f.Stat(); err == nil {
		if k, ok := keyOf(path, fi); ok {
			if cached.Add(1) > maxCached {
				interpreters.Clear()
				cached.Store(1)
			}
			interpreters.Store(k, [2]string{interp, viaEnv})
		}
	}
	return interp, viaEnv
}

// fileKey identifies a version of a file: a rewrite in place that keeps
// size and mtime still changes ctime.
type fileKey struct {
	path               string
	size, mtime, ctime int64
	ino, dev           uint64
}

func keyOf(path string, fi os.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return fileKey{}, false
	}
	return fileKey{path: path, size: fi.Size(), mtime: fi.ModTime().UnixNano(), ctime: ctimeOf(st), ino: uint64(st.Ino), dev: uint64(st.Dev)}, true
}

// readInterpreter reads the interpreter from an open file.
func readInterpreter(f *os.File) (interp, viaEnv string) {
	head := make([]byte, 256)
	n, _ := f.Read(head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := bufio.NewReader(bytes.NewReader(head[2:])).ReadLine()
		fields := strings.Fields(string(line))
		if len(fields) == 0 || !filepath.IsAbs(fields[0]) {
			return "", ""
		}
		if filepath.Base(fields[0]) == "env" {
			for _, w := range fields[1:] {
				if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
					continue // env's options (-S) and NAME=VALUE assignments
				}
				return fields[0], w
			}
		}
		return fields[0], ""
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", ""
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				return string(bytes.TrimRight(b, "\x00")), ""
			}
		}
	}
	return "", ""
}
