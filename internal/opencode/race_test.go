//go:build race

package opencode

// raceAllocs is what the race detector adds to a status read over HTTP
// (TestStatusReadOverHTTPAllocatesLittle).
const raceAllocs = 6
