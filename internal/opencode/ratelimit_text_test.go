package opencode_test

import (
	"encoding/json"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// OpenCode 2 says a remote server's endpoint answered 429 only in the
// status entry's error, in two exact forms: the MCP SDK's "Error POSTing
// to endpoint: <body>" with OpenCode's trailing "(HTTP 429)", and its own
// cooldown's "Error POSTing to endpoint: MCP endpoint cooldown after HTTP
// 429". The body is the MCP server's: text it chose, anywhere but at the
// end OpenCode writes, is no rate limit.
func TestRateLimitIsRecognisedOnlyInOpenCodesOwnWords(t *testing.T) {
	for errText, want := range map[string]bool{
		"Error POSTing to endpoint: Too Many Requests (HTTP 429)":                     true,
		"Error POSTing to endpoint: MCP endpoint cooldown after HTTP 429":             true,
		"Error POSTing to endpoint: slow down (HTTP 429) (HTTP 500)":                  false,
		"Error POSTing to endpoint: MCP endpoint cooldown after HTTP 429 (HTTP 500)":  false,
		"Error POSTing to endpoint: MCP endpoint cooldown after HTTP 429, not really": false,
		"MCP error -32000: upstream answered HTTP 429":                                false,
		"MCP error -32000: Error POSTing to endpoint: x (HTTP 429) and more":          false,
		"tool failed (HTTP 429)": false,
		"HTTP 429":               false,
		"Connection closed":      false,
	} {
		body, _ := json.Marshal(map[string]any{"data": []any{map[string]any{"name": "r", "status": map[string]any{"status": "failed", "error": errText}}}})
		_, st, err := opencode.ParseStatusV2(body)
		if err != nil {
			t.Fatal(err)
		}
		if got := st["r"].RateLimited; got != want {
			t.Errorf("error %q: rate limited = %v, want %v", errText, got, want)
		}
	}
}
