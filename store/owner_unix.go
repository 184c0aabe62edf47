//go:build unix

package store

import (
	"errors"
	"io/fs"
	"os"
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

// heldByAnother reports a store directory another open store holds: the
// flock Badger takes on it. Probing first keeps a second process from
// checking, and rewriting TABLESUMS beside, a store in use.
func heldByAnother(dir string) bool {
	d, err := os.Open(dir)
	if err != nil {
		return false // Badger says what is wrong
	}
	defer d.Close()
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(d.Fd()), syscall.LOCK_UN)
	return false
}
