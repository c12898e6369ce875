package opencode_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// partUpdated is a message.part.updated as OpenCode 1.x sends it while a
// reply streams: the part's whole text so far, here about size bytes of it,
// with the escapes a real reply holds (quotes, newlines, code). Its keys
// are in OpenCode's order: directory, project, then payload's type,
// properties and id.
func partUpdated(size int) []byte {
	sorted := partUpdatedSorted(size)
	i := bytes.Index(sorted, []byte(`"properties":`))
	j := bytes.Index(sorted, []byte(`,"type":"message.part.updated"}`))
	props := sorted[i:j]
	return []byte(`{"directory":"/home/u/project","project":"4b0ea68d7af9a6031a7ffda7ad66e0cb83315750","payload":{"type":"message.part.updated",` +
		string(props) + `,"id":"evt_01"}}`)
}

// partUpdatedSorted is partUpdated with its keys sorted, as encoding/json
// (and the fake) writes them: the properties come before the type, so
// ParseEvent has to pass over them.
func partUpdatedSorted(size int) []byte {
	chunk := "func main() {\n\tfmt.Println(\"héllo \\\\ wörld\")\n}\n"
	text := strings.Repeat(chunk, size/len(chunk)+1)[:size]
	b, _ := json.Marshal(map[string]any{
		"directory": "/home/u/project",
		"project":   "4b0ea68d7af9a6031a7ffda7ad66e0cb83315750",
		"payload": map[string]any{
			"type": "message.part.updated",
			"properties": map[string]any{
				"part": map[string]any{
					"id": "prt_01", "sessionID": "ses_01", "messageID": "msg_01",
					"type": "text", "text": text,
					"time": map[string]any{"start": 1750000000000},
				},
				"delta": "}\n",
			},
			"id": "evt_01",
		},
	})
	return b
}

func BenchmarkParseEvent(b *testing.B) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"part.updated-200KB", partUpdated(200 << 10)},
		{"part.updated-200KB-sorted-keys", partUpdatedSorted(200 << 10)},
		{"tools.changed", []byte(`{"directory":"/home/u/project","project":"p","payload":{"type":"mcp.tools.changed","properties":{"server":"github"},"id":"evt"}}`)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := opencode.ParseEvent(tc.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
