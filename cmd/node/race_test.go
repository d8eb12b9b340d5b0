//go:build race

package main

// raceEnabled: timing assertions are skipped under the race detector.
const raceEnabled = true
