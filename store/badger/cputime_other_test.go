//go:build !unix

package badger

import (
	"testing"
	"time"
)

// cpuTime is not measured here: the benchmarks report 0 for it.
func cpuTime(*testing.B) time.Duration { return 0 }
