//go:build !unix

package badger

import "io/fs"

// ownerUID knows no owner: file ownership is not a uid here.
func ownerUID(fs.FileInfo) (int, bool) { return 0, false }

// lockDir takes no lock of its own: Badger's lock says so here.
func lockDir(string) (unlock func(), held bool) { return func() {}, false }

// processGone cannot tell here: every pid may be alive.
func processGone(int) bool { return false }
