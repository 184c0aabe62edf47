package badger

import (
	"os"
	"syscall"
)

// datasync flushes f's data (not its timestamps, which mapped writes
// change all the time) to the disk.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// exists tells whether the directory open as d holds name, looked up from
// d: one path component, where os.Stat walks every one from the root.
func exists(d *os.File, name string) bool {
	return syscall.Faccessat(int(d.Fd()), name, syscall.F_OK, 0) == nil
}
