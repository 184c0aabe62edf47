//go:build !unix

package notify

import "os/exec"

// ownGroup: without process groups only the hook itself is killed.
func ownGroup(*exec.Cmd) {}

// killGroup: without process groups, what a hook left is not found.
func killGroup(*exec.Cmd) {}
