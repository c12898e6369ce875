package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// The inputs. partUpdated and partUpdatedSorted are the generators of
// internal/opencode/events_bench_test.go, repeated here because a test file
// of another package cannot be imported; TestInputsMatchTheProjectBenchmark
// pins their sizes and first bytes.

// partUpdated is a message.part.updated as OpenCode 1.x sends it while a
// reply streams: the part's whole text so far, about size bytes of it, in
// OpenCode's key order (directory, project, then payload's type,
// properties and id).
func partUpdated(size int) []byte {
	sorted := partUpdatedSorted(size)
	i := bytes.Index(sorted, []byte(`"properties":`))
	j := bytes.Index(sorted, []byte(`,"type":"message.part.updated"}`))
	props := sorted[i:j]
	return []byte(`{"directory":"/home/u/project","project":"4b0ea68d7af9a6031a7ffda7ad66e0cb83315750","payload":{"type":"message.part.updated",` +
		string(props) + `,"id":"evt_01"}}`)
}

// partUpdatedSorted is partUpdated with its keys sorted, as encoding/json
// writes them: the properties come before the type.
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

// toolsChanged is the small mcp.tools.changed of events_bench_test.go.
var toolsChanged = []byte(`{"directory":"/home/u/project","project":"p","payload":{"type":"mcp.tools.changed","properties":{"server":"github"},"id":"evt"}}`)

const (
	dir     = `/home/u/project`
	project = `4b0ea68d7af9a6031a7ffda7ad66e0cb83315750`
)

// event is one 1.x /global/event data field, keys in OpenCode's order.
func event(typ, props string, id int) []byte {
	return fmt.Appendf(nil, `{"directory":%q,"project":%q,"payload":{"type":%q,"properties":%s,"id":"evt_%04d"}}`, dir, project, typ, props, id)
}

// smallEvents is n events of the kinds a streaming reply sends, 0.1 to
// 2.2 KB each: mostly message.part.updated whose text grows and starts
// again, a message.updated every 10th, session.status every 25th,
// server.heartbeat every 100th and mcp.tools.changed every 250th.
func smallEvents(n int) [][]byte {
	words := strings.Repeat(`Here is the \"plan\":\n1. read the file\n2. `, 60)
	out := [][]byte{[]byte(`{"payload":{"type":"server.connected","properties":{},"id":"evt_0000"}}`)}
	for i := 1; len(out) < n; i++ {
		switch {
		case i%250 == 0:
			out = append(out, event("mcp.tools.changed", `{"server":"github"}`, i))
		case i%100 == 0:
			out = append(out, []byte(`{"directory":"global","payload":{"type":"server.heartbeat","properties":{},"id":"evt_hb"}}`))
		case i%25 == 0:
			out = append(out, event("session.status", `{"sessionID":"ses_01","status":{"type":"busy"}}`, i))
		case i%10 == 0:
			out = append(out, event("message.updated", `{"info":{"id":"msg_01","sessionID":"ses_01","role":"assistant","time":{"created":1750000000000},"parentID":"msg_00","modelID":"m","providerID":"fake","mode":"build","path":{"cwd":"/home/u/project","root":"/home/u/project"},"cost":0,"tokens":{"input":1200,"output":340,"reasoning":0,"cache":{"read":0,"write":0}}}}`, i))
		default:
			text := words[:(i%50)*40]
			out = append(out, event("message.part.updated", `{"part":{"id":"prt_01","sessionID":"ses_01","messageID":"msg_01","type":"text","text":"`+text+`","time":{"start":1750000000000}},"delta":"2. "}`, i))
		}
	}
	return out
}

// stream frames events as OpenCode 1.x writes them: one data line each.
func stream(events ...[]byte) []byte {
	var b bytes.Buffer
	for _, ev := range events {
		b.WriteString("data: ")
		b.Write(ev)
		b.WriteString("\n\n")
	}
	return b.Bytes()
}

// The three streams of the SSE comparison.
var (
	// smallStream: 1,000 small events.
	smallStream = stream(smallEvents(1000)...)
	// bigStream: server.connected, then ten 200 KB message.part.updated.
	bigStream = stream(append(smallEvents(1), repeat(partUpdated(200<<10), 10)...)...)
	// oversizedStream: 10 small events, one 2 MB message.part.updated (over
	// sse.MaxFrame), then 10 small events, the last an mcp.tools.changed
	// that must still be seen.
	oversizedStream = stream(append(append(smallEvents(10), partUpdated(2<<20)), append(smallEvents(10)[1:], toolsChanged)...)...)
)

func repeat(b []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// chunked hands out at most n bytes a Read, as an HTTP body read from a
// socket does; bytes.Reader alone would hand a reader the whole stream in
// one Read, which no network does.
type chunked struct {
	r *bytes.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), c.n)])
}

func newChunked(b []byte, n int) io.Reader { return &chunked{r: bytes.NewReader(b), n: n} }
