//go:build !linux

package badger

// stampOf has no stamp here, so every table is read at every open.
func stampOf(string) (fileStamp, bool) { return fileStamp{}, false }
