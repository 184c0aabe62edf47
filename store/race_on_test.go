//go:build race

package store_test

// raceEnabled: the race detector slows Badger several times over; long
// tests scale down under it.
const raceEnabled = true
