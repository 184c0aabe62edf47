//go:build !linux

package badger

import "os"

func datasync(f *os.File) error { return f.Sync() }
