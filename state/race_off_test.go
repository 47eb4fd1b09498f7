//go:build !race

package state

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
