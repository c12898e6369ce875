package opencode_test

import (
	"bytes"
	"encoding/json"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"strings"
	"testing"
)

// The fields ParseEvent needs are found whatever the key order, white
// space and escapes, and nothing inside a passed-over value is mistaken
// for one of them.
func TestParseEventFieldsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want opencode.Event
	}{
		{`{"payload":{"properties":{"server":"s"},"id":"e","type":"mcp.tools.changed"},"directory":"/p"}`,
			opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "s"}},
		{" {\n\t\"directory\" : \"/a \\\"b\\\" \\u00fc\\\\\" , \"payload\" : { \"type\" : \"mcp.tools.changed\" , \"properties\" : { \"other\" : [1, {\"server\": \"no\"}], \"server\" : \"s\\/1\" } } } ",
			opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: `/a "b" ü\`, Server: "s/1"}},
		{`{"directory":"/p","payload":{"type":"message.part.updated","properties":{"part":{"text":"\",\"type\":\"mcp.tools.changed\"}},\"directory\":\"/evil\"\\"}}}}`,
			opencode.Event{Kind: opencode.KindActivity, Type: "message.part.updated", Directory: "/p"}},
		{`{"project":{"directory":"/no"},"payload":{"properties":{"type":"x","directory":"/no"},"type":"session.idle"},"directory":"/p"}`,
			opencode.Event{Kind: opencode.KindActivity, Type: "session.idle", Directory: "/p"}},
		{`{"direct\u006fry":"/p","payload":{"typ\u0065":"server.instance.disposed","properties":{"directory":"/x"}}}`,
			opencode.Event{Kind: opencode.KindInstanceGone, Type: "server.instance.disposed", Directory: "/x"}},
		{`{"directory":"/p","payload":{"type":"mcp.tools.changed","properties":[{"server":"s"}]}}`,
			opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p"}},
		{`{"directory":7,"payload":{"type":"mcp.tools.changed","properties":{"server":null}}}`,
			opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed"}},
		{`{"directory":"/p","payload":{"type":"mcp.tools.changed"}}`,
			opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p"}},
	} {
		got, err := opencode.ParseEvent([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("ParseEvent(%s)\n = %+v, %v\nwant %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{
		`{"payload":{"type":5}}`, `{"payload":{"type":null}}`, `{"payload":5}`, `{"payload":null}`,
		`{"payload":{"type":"x"`, `{"directory":"/p","payload":{"properties":{"a":[}],"type":"x"}}`,
		`{"directory":"/p" "payload":{"type":"x"}}`, `{,"payload":{"type":"x"}}`, `{"payload":{"type":"x\`,
		`{"payload":{"type":"a\u12"}}`, "{\"payload\":{\"type\":\"a\x01\"}}",
	} {
		if ev, err := opencode.ParseEvent([]byte(bad)); err == nil {
			t.Errorf("ParseEvent(%s) = %+v, want an error", bad, ev)
		}
	}
}

// An activity event costs no allocation beyond its type and directory,
// however large its properties.
func TestParseEventActivityIsCheap(t *testing.T) {
	for _, data := range [][]byte{partUpdated(200 << 10), partUpdatedSorted(200 << 10)} {
		allocs := testing.AllocsPerRun(20, func() {
			if ev, err := opencode.ParseEvent(data); err != nil || ev.Kind != opencode.KindActivity || ev.Directory != "/home/u/project" {
				t.Fatalf("ParseEvent = %+v, %v", ev, err)
			}
		})
		if allocs > 2 {
			t.Errorf("%.0f allocations per message.part.updated, want at most 2", allocs)
		}
	}
}

// referenceEvent is ParseEvent written the plain way, with encoding/json
// and maps, to check the scanner against.
func referenceEvent(b []byte) (opencode.Event, bool) {
	var top, payload, props map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil || top == nil || json.Unmarshal(top["payload"], &payload) != nil || payload == nil {
		return opencode.Event{}, false
	}
	var typ, dir string
	if json.Unmarshal(payload["type"], &typ) != nil || typ == "" {
		return opencode.Event{}, false
	}
	_ = json.Unmarshal(top["directory"], &dir)
	_ = json.Unmarshal(payload["properties"], &props)
	prop := func(k string) string {
		var v string
		_ = json.Unmarshal(props[k], &v)
		return v
	}
	ev := opencode.Event{Type: typ, Directory: dir}
	switch {
	case typ == "mcp.tools.changed":
		ev.Kind, ev.Server = opencode.KindServerFailed, prop("server")
	case typ == "server.instance.disposed":
		ev.Kind = opencode.KindInstanceGone
		if d := prop("directory"); d != "" {
			ev.Directory = d
		}
	case typ == "global.disposed":
		ev.Kind, ev.Directory = opencode.KindAllGone, ""
	case strings.HasPrefix(typ, "session.") || strings.HasPrefix(typ, "message."):
		ev.Kind = opencode.KindActivity
	}
	if ev.Directory == "global" {
		ev.Directory = ""
	}
	return ev, true
}

// duplicateKeys reports whether an object, its payload or the payload's
// properties repeat a key (encoding/json keeps the last, ParseEvent the
// first).
func duplicateKeys(b []byte) bool {
	var top, payload map[string]json.RawMessage
	_ = json.Unmarshal(b, &top)
	_ = json.Unmarshal(top["payload"], &payload)
	for _, obj := range []json.RawMessage{b, top["payload"], payload["properties"]} {
		d := json.NewDecoder(bytes.NewReader(obj))
		if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
			continue
		}
		seen := map[string]bool{}
		for d.More() {
			tok, err := d.Token()
			if err != nil {
				break
			}
			k, _ := tok.(string)
			if seen[k] {
				return true
			}
			seen[k] = true
			var skip json.RawMessage
			if d.Decode(&skip) != nil {
				break
			}
		}
	}
	return false
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"directory":"/tmp/p","payload":{"type":"mcp.tools.changed","properties":{"server":"s"}}}`))
	f.Add([]byte(`{"payload":{"type":"server.heartbeat","properties":{}}}`))
	f.Add([]byte(`{"directory":1,"payload":{"type":"x","properties":[]}}`))
	f.Add([]byte(`{"payload":{"properties":{"directory":"/x\"y"},"type":"server.instance.disposed"},"directory":"global"}`))
	f.Add([]byte(`{"directory":"/p","payload":{"type":"message.part.updated","properties":{"part":{"text":"a\\\"b"}}}}`))
	f.Add([]byte(`{"d\u0069rectory":"\ud83d\ude00","payload":{"type":"session.idle"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := opencode.ParseEvent(b)
		if err == nil && ev.Type == "" {
			t.Fatal("accepted an event without a type")
		}
		if !json.Valid(b) || duplicateKeys(b) {
			return // ParseEvent may accept a bad tail it never needs to read
		}
		want, ok := referenceEvent(b)
		if ok != (err == nil) || ok && ev != want {
			t.Fatalf("ParseEvent = %+v, %v; reference %+v, %v", ev, err, want, ok)
		}
	})
}

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
