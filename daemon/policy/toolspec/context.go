package toolspec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/termd/termd/daemon/policy/verdict"
	"io"
	"os"
	"sync"
	"syscall"
)

type DecideCtx struct {
	Workspaces []string
	Protected  []string
	Home       string
	Sandbox    bool
	SandboxBy  string
	// Credentials the caller may ask for (Context.Credentials).
	Credentials map[string]verdict.CredentialScope
	EgressLists []string
	// Paths is this decision's memo of the path components it resolved.
	Paths PathMemo
}

// hashKey identifies a file version: a rewrite in place that keeps size and
// mtime (touch -d) still changes ctime.
type hashKey struct {
	path               string
	size, mtime, ctime int64
	ino, dev           uint64
}

var hashCache sync.Map // hashKey -> string

func FileSHA256(path string) (string, error) {
	// Not os.Open: it offers the file to the poller and sets it back to
	// blocking, five system calls more than open, fstat and close, which is
	// all a hit in hashCache needs.
	fd, err := openRead(path)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return "", &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		// A FIFO or a device (a link in the project swapped in after the
		// check) would be read forever.
		syscall.Close(fd)
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	k := hashKey{path: path, size: st.Size, mtime: mtimeOf(&st), ino: uint64(st.Ino), dev: uint64(st.Dev), ctime: ctimeOf(&st)}
	if v, ok := hashCache.Load(k); ok {
		syscall.Close(fd)
		return v.(string), nil
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	hashCache.Store(k, sum)
	return sum, nil
}

// openRead opens path read-only, again when a signal interrupted it. It
// never blocks (a FIFO's open would wait for a writer).
func openRead(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// ProjectCode is a command that runs a workspace file: the file itself
// (program) or a script given to its interpreter.
type ProjectCode struct {
	File    string // real path, inside a workspace ("" for a module run)
	Program bool   // the file is the program (not an interpreter's script)
	Why     string
	// Module: the interpreter runs a module or its test runner
	// (interpreterProject); reads are the files it names, net whether it
	// reaches the network, entryTool the tool whose entry files it reads.
	Module    string
	Reads     []string
	Net       bool
	EntryTool string
}

// Exists reports whether name, relative to dir, names an existing file.
func Exists(dir, name string) bool {
	if dir == "" {
		return false
	}
	_, err := os.Lstat(ResolvePath(dir, name))
	return err == nil
}

func IsDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func InAnyWorkspace(real string, ctx *DecideCtx) bool {
	for _, ws := range ctx.Workspaces {
		if Within(ws, real) {
			return true
		}
	}
	return false
}

// IsSetID reports whether path is a regular file with setuid or setgid.
func IsSetID(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0
}
