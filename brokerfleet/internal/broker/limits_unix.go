//go:build unix

package broker

import "syscall"

// fileLimit is the process's open-file limit (RLIMIT_NOFILE), or 0 when
// unknown.
func fileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return int(min(r.Cur, 1<<30))
}
