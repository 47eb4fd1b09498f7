//go:build !race

package baton

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
