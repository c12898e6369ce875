package opencode

// NewSessionMemoryForTest is the 2.x stream's parser with a session memory
// of n sessions.
func NewSessionMemoryForTest(n int) func([]byte) (Event, error) { return newSessionDirs(n).parse }

// ConfigLayers names the layers ReadMCPConfig reads for dir (absolute and
// clean) by env's line, V1 or V2, lowest priority first: each file's
// path, or $OPENCODE_CONFIG_CONTENT for the inline config.
func ConfigLayers(dir string, env ConfigEnv) []string {
	sources := sourcesV1
	if env.Generation == V2 {
		sources = sourcesV2
	}
	var out []string
	for _, s := range sources(dir, env) {
		if s.Inline {
			out = append(out, "$OPENCODE_CONFIG_CONTENT")
		} else {
			out = append(out, s.Path)
		}
	}
	return out
}

// ParseConfigFile is the parser ReadMCPConfig reads each layer with.
var ParseConfigFile = parseConfigServers

// RaceParseAllocs is what the race detector adds to a ParseStatus's
// allocations (0 without it).
const RaceParseAllocs = raceParseAllocs
