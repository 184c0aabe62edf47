//go:build unix

package store

import (
	"io/fs"
	"syscall"
)

// ownerUID is the user that owns fi, when the system says.
func ownerUID(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
