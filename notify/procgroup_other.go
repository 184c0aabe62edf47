//go:build !unix

package notify

import "os/exec"

// ownGroup: without process groups only the hook itself is killed.
func ownGroup(*exec.Cmd) {}
