//go:build race

package engine

// raceEnabled: the race detector slows Badger and go-sdk several times
// over; time targets hold without it.
const raceEnabled = true
