//go:build race

package badger_test

// raceEnabled: the race detector slows Badger several times over; long
// tests scale down under it.
const raceEnabled = true
