//go:build chaos

package chaos

import "syscall"

// deathSignal makes a child die with the test binary (Linux), so a
// killed test leaves no brokers behind.
func deathSignal() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
