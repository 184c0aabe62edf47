package badger

import (
	"os"
	"syscall"
)

// datasync flushes f's data (not its timestamps, which mapped writes
// change all the time) to the disk.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
