//go:build race

package service

import "time"

// takeoverBound is the 1 s a takeover must take at most, scaled for the
// race detector: it slows the store's open after a kill (Badger's replay)
// from about 60 ms to 230–340 ms alone, and past 1 s beside other tests.
const takeoverBound = 3 * time.Second
