package badger

import "syscall"

// freeBytes is the space left for an unprivileged writer on dir's file
// system; ok is false when it cannot be told.
func freeBytes(dir string) (free uint64, ok bool) {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
