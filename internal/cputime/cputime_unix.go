//go:build unix

// Package cputime reads the CPU time this process has used, for
// benchmarks that report it beside wall time: on a shared machine, CPU
// time moves less with the load than wall time does.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Used is the process's user and system CPU time so far.
func Used(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
