//go:build race

package ui

// raceEnabled: the race detector slows the engine several times over;
// time bounds meant for the real build widen under it.
const raceEnabled = true
