//go:build !race

package service

import "time"

// takeoverBound is the 1 s a takeover must take at most.
const takeoverBound = time.Second
