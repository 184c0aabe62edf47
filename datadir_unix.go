//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// openNoFollow makes an open fail on a symbolic link instead of following it.
const openNoFollow = syscall.O_NOFOLLOW

// ownerUID is the user that owns fi, when the system says.
func ownerUID(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
