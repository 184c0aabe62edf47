//go:build !linux

package badger

import (
	"os"
	"path/filepath"
)

func datasync(f *os.File) error { return f.Sync() }

// exists tells whether the directory open as d holds name.
func exists(d *os.File, name string) bool {
	_, err := os.Stat(filepath.Join(d.Name(), name))
	return err == nil
}
