package store

import (
	"os"
	"runtime/debug"
)

// OwnerGCPercent is the Go heap target an owner keeps (GOGC): the runtime
// collects once the heap has grown this many percent over the live data,
// and RSS follows the heap. A task flipping 10,000 times with a 4 KB
// message (BenchmarkFlippingTask, ~15 MB of live heap growth) grew RSS by
// 36.7 MB at Go's default 100, 29.9 MB at 50 and 24.4 MB at 25, for 14%
// and 38% more CPU (three processes side by side). A soft memory limit
// (32 MiB: 22.2 MB) is not used: an owner whose live heap nears it (31
// MiB with 10,000 tasks watched) would spend up to half its CPU (the
// runtime's cap) collecting.
const OwnerGCPercent = 50

// TuneOwnerGC sets OwnerGCPercent for this process, unless GOGC is set in
// its environment: the one who set it chose. A process that owns a store
// for long (taskdeck serve) calls it once at start-up; restore sets back
// the percent it replaced (benchmarks that measure as an owner).
func TuneOwnerGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(OwnerGCPercent)
	return func() { debug.SetGCPercent(old) }
}
