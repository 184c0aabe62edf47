package badger

import (
	"os"
	"syscall"
)

// stampOf is the file's inode and change time: any write, truncation,
// chmod or replacement of the file through the file system moves one of
// them, and neither can be set back by a program.
func stampOf(path string) (fileStamp, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, false
	}
	return fileStamp{ino: st.Ino, ctime: st.Ctim.Nano()}, true
}
