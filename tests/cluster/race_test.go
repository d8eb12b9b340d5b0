//go:build race

package cluster

// raceEnabled: timing assertions are skipped under the race detector.
const raceEnabled = true
