package toolspec

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadProjectFile reads a small file of the project's (package.json, .npmrc,
// a .git file, alternates) that the policy inspects while it decides. The
// project is the principal's: the name may be a link to a device or a FIFO
// (/dev/zero would be read until termd runs out of memory, a FIFO would hold
// the decision forever), or to a file of any size. Only a regular file of at
// most max bytes is read; the open never blocks.
func ReadProjectFile(path string, max int64) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return data, nil
}
