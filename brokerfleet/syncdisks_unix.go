//go:build unix

package main

import "syscall"

// syncDisks writes every filesystem's dirty pages back (sync(2)).
func syncDisks() { syscall.Sync() }
