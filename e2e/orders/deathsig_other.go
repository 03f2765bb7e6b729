//go:build !linux

package orders

import "syscall"

func setDeathSignal(*syscall.SysProcAttr) {}
