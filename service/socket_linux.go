package service

import (
	"fmt"
	"os"
)

// viaDir names name in the open directory dir by a short path: the
// kernel resolves /proc/self/fd/N to dir itself, for bind and connect.
func viaDir(dir *os.File, name string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), name)
}
