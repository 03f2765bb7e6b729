package orders

import "syscall"

// setDeathSignal kills the child when this process dies, so a killed test
// leaves no server behind.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
