//go:build !linux

package service

import "os"

// viaDir has no short path for a directory here: a deep data directory
// is refused.
func viaDir(*os.File, string) string { return "" }

// fileUID is unknown here: the 0700 data directory keeps others out.
func fileUID(os.FileInfo) (int, bool) { return 0, false }
