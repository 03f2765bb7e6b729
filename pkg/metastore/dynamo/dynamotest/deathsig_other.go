//go:build !linux

package dynamotest

import "os/exec"

// dieWithParent does nothing outside Linux: call StopDynalite from
// TestMain there.
func dieWithParent(*exec.Cmd) {}
