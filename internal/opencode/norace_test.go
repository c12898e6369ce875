//go:build !race

package opencode

// raceAllocs: no race detector, nothing added.
const raceAllocs = 0
