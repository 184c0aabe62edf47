//go:build !unix

package main

import "io/fs"

// openNoFollow: no such flag here; the log is checked after it is opened.
const openNoFollow = 0

// ownerUID: file ownership is not a uid here.
func ownerUID(fs.FileInfo) (int, bool) { return 0, false }
