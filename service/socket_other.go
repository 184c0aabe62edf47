//go:build !linux

package service

import "os"

// viaDir has no short path for a directory here: a deep data directory
// is refused.
func viaDir(*os.File, string) string { return "" }
