//go:build unix

package main

import "syscall"

// openNoFollow makes an open fail on a symbolic link instead of following it.
const openNoFollow = syscall.O_NOFOLLOW
