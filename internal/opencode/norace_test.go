//go:build !race

package opencode

// raceAllocs: no race detector, nothing added.
const raceAllocs = 0

// raceParseAllocs: no race detector, nothing added.
const raceParseAllocs = 0
