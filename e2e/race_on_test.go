//go:build race

package e2e

// raceEnabled: the race detector slows Badger and go-sdk several times
// over; load tests scale down under it.
const raceEnabled = true
