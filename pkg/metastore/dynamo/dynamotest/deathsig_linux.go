package dynamotest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd when the thread that starts it
// ends, so that no stand-in outlives its test binary.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
