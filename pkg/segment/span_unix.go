//go:build unix

package segment

import (
	"os"

	"golang.org/x/sys/unix"
)

// dup duplicates f's descriptor (close-on-exec, like every descriptor Go
// opens), for a Span.
func (f osFile) dup() (*os.File, int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, 0, err
	}
	var fd int
	var derr error
	if err := rc.Control(func(src uintptr) { fd, derr = unix.FcntlInt(src, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, 0, err
	}
	if derr != nil {
		return nil, 0, derr
	}
	return os.NewFile(uintptr(fd), f.Name()), fd, nil
}
