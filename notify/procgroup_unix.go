//go:build unix

package notify

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own, killed whole at the
// timeout: a hook's children go with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
