// Package testproc makes the processes tests start end with their test.
// Each child runs in a process group of its own, so that killing the
// group at cleanup takes what the child started too (a taskdeck's stdio
// servers, PostgreSQL's backends, npm's node); and on Linux the kernel
// kills the child when the test binary dies first (Pdeathsig), since a
// test binary that times out panics and runs no cleanup. What a child
// started and left running in its group outlives a test binary that died
// that way: only a cleanup kills the whole group.
package testproc

import (
	"errors"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// Group sets cmd, before it starts, to run in a process group of its own
// and to be SIGKILLed if the test binary dies; a Credential already set
// is kept.
func Group(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// Kill is an exec.Cmd.Cancel for a child of exec.CommandContext that
// Group set up: the context's end kills its group, not only the child.
func Kill(cmd *exec.Cmd) func() error {
	return func() error { return Signal(cmd, syscall.SIGKILL) }
}

// Signal sends sig to the process group of a child Group set up: by its
// pid, which is the group's id.
func Signal(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return errors.New("testproc: the process has not started")
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// Stop ends a started child and its group: sig to the child (SIGKILL:
// to the group at once), then, once it has exited or grace has passed,
// SIGKILL to the group, for what the child left running or the child
// itself. It returns once exited is closed (the caller's Wait returned).
func Stop(cmd *exec.Cmd, sig syscall.Signal, grace time.Duration, exited <-chan struct{}) {
	if sig != syscall.SIGKILL {
		_ = cmd.Process.Signal(sig) // an error means it has ended already
		select {
		case <-exited:
		case <-time.After(grace):
		}
	}
	// While any of the group lives its id cannot be reused: this kills
	// only the child's group.
	_ = Signal(cmd, syscall.SIGKILL)
	<-exited
}

// FreePort returns a loopback TCP port nothing listened on a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
