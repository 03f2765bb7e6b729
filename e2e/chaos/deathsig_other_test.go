//go:build chaos && !linux

package chaos

import "syscall"

func deathSignal() *syscall.SysProcAttr { return nil }
