package service

import (
	"fmt"
	"os"
	"syscall"
)

// viaDir names name in the open directory dir by a short path: the
// kernel resolves /proc/self/fd/N to dir itself, for bind and connect.
func viaDir(dir *os.File, name string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), name)
}

// fileUID is the user that owns the file.
func fileUID(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
