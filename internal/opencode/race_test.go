//go:build race

package opencode

// raceAllocs is what the race detector adds to a status read over HTTP
// (TestStatusReadOverHTTPAllocatesLittle).
const raceAllocs = 6

// raceParseAllocs is what the race detector adds to ParseStatus, averaged
// over 100 reads: under it sync.Pool drops some of what is put back, so
// json.Valid's scanner is sometimes made again (TestStatusReadAllocatesOnlyItsMap).
const raceParseAllocs = 1
