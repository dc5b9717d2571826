package main

import (
	"os/exec"
	"syscall"
)

// dieWithTest has cmd's process killed when the test binary dies (a panic, a timeout, kill -9):
// a nats-server, sim or gateway the test started is not left running. Linux sends the signal
// when the thread that started the child exits; the Go runtime ends a thread only when a
// goroutine locked to it exits, which these tests never do around a start.
func dieWithTest(cmd *exec.Cmd) *exec.Cmd {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd
}
