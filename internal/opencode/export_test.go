package opencode

// RaceParseAllocs is what the race detector adds to a ParseStatus's
// allocations (0 without it).
const RaceParseAllocs = raceParseAllocs

// NewSessionMemoryForTest is the 2.x stream's parser with a session memory
// of n sessions.
func NewSessionMemoryForTest(n int) func([]byte) (Event, error) { return newSessionDirs(n).parse }
