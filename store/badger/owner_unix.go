//go:build unix

package badger

import (
	"errors"
	"io/fs"
	"os"
	"sync"
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

// lockDir takes the flock Badger takes on a store directory, for the
// checks before Badger's Open: another process opening the store
// meanwhile rewrites its WAL as it replays it, and a check reading that
// would call a sound store damaged. held reports the lock already taken
// by another open store: probing first keeps a second process from
// checking, and rewriting TABLESUMS beside, a store in use. unlock lets
// the lock go, for Badger to take it; a process that takes it in between
// makes Badger's Open fail as locked.
func lockDir(dir string) (unlock func(), held bool) {
	d, err := os.Open(dir)
	if err != nil {
		return func() {}, false // Badger says what is wrong
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		return func() {}, errors.Is(err, syscall.EWOULDBLOCK)
	}
	return sync.OnceFunc(func() { d.Close() }), false // closing releases the flock
}

// processGone says that no process has the id pid.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
