package procview

import (
	"strings"
	"testing"
)

// (Orphans and duplicates are shown "with pids and the
// command line minus secrets"; rule 12). Smithery's install line, the way
// many users add stdio MCP servers to OpenCode, passes its API key as
// --key and the server's settings (tokens included) as --config JSON.
// Neither is masked: status, doctor and the debug log print the secrets.
func TestDisplayMasksSmitheryKeyAndJSONConfig(t *testing.T) {
	const key = "0b7c1a52-9e4d-4c1f-8d2a-5b6e7f8a9c0d"
	const pat = "1f2e3d4c5b6a79881726354453627180"
	for _, argv := range [][]string{
		{"npx", "-y", "@smithery/cli@latest", "run", "@upstash/context7-mcp", "--key", key},
		{"npx", "-y", "@smithery/cli@latest", "run", "@smithery-ai/github", "--config", `{"githubPersonalAccessToken":"` + pat + `"}`},
	} {
		out := Display(argv)
		for _, secret := range []string{key, pat} {
			if strings.Contains(out, secret) {
				t.Errorf("Display shows the secret %q: %s", secret, out)
			}
		}
	}
}
