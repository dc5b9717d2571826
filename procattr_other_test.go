//go:build !linux

package main

import "os/exec"

// dieWithTest: only Linux kills a child when its parent dies (Pdeathsig); elsewhere the test's
// cleanups stop what it started.
func dieWithTest(cmd *exec.Cmd) *exec.Cmd { return cmd }
