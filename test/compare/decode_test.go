package compare

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/valyala/fastjson"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

// decoded is what the engine needs of a 1.x event: its directory, its
// payload.type and, for mcp.tools.changed, payload.properties.server.
type decoded struct {
	dir, typ, server string
}

// A decoder is built once per stream, as the engine would build it: a
// fastjson.Parser is reused from event to event.
type decoder struct {
	name string
	new  func() func([]byte) (decoded, error)
}

var errNoType = errors.New("event has no payload.type")

var decoders = []decoder{
	{"ParseEvent", func() func([]byte) (decoded, error) {
		return func(data []byte) (decoded, error) {
			ev, err := opencode.ParseEvent(data)
			return decoded{ev.Directory, ev.Type, ev.Server}, err
		}
	}},
	{"gjson", func() func([]byte) (decoded, error) {
		return func(data []byte) (decoded, error) {
			typ := gjson.GetBytes(data, "payload.type")
			if typ.Type != gjson.String {
				return decoded{}, errNoType
			}
			d := decoded{typ: typ.Str}
			if dir := gjson.GetBytes(data, "directory"); dir.Type == gjson.String {
				d.dir = dir.Str
			}
			if d.typ == opencode.EventToolsChanged {
				d.server = gjson.GetBytes(data, "payload.properties.server").Str
			}
			return d, nil
		}
	}},
	{"fastjson", func() func([]byte) (decoded, error) {
		var p fastjson.Parser
		return func(data []byte) (decoded, error) {
			v, err := p.ParseBytes(data)
			if err != nil {
				return decoded{}, err
			}
			typ := v.Get("payload", "type")
			if typ == nil || typ.Type() != fastjson.TypeString {
				return decoded{}, errNoType
			}
			d := decoded{typ: string(typ.GetStringBytes()), dir: string(v.GetStringBytes("directory"))}
			if d.typ == opencode.EventToolsChanged {
				d.server = string(v.GetStringBytes("payload", "properties", "server"))
			}
			return d, nil
		}
	}},
	{"encoding-json", func() func([]byte) (decoded, error) {
		return func(data []byte) (decoded, error) {
			var ev struct {
				Directory string `json:"directory"`
				Payload   struct {
					Type       string `json:"type"`
					Properties struct {
						Server string `json:"server"`
					} `json:"properties"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(data, &ev); err != nil {
				return decoded{}, err
			}
			if ev.Payload.Type == "" {
				return decoded{}, errNoType
			}
			d := decoded{dir: ev.Directory, typ: ev.Payload.Type}
			if d.typ == opencode.EventToolsChanged {
				d.server = ev.Payload.Properties.Server
			}
			return d, nil
		}
	}},
}

// The inputs of BenchmarkParseEvent in internal/opencode.
var decodeInputs = []struct {
	name string
	data []byte
	want decoded
}{
	{"part.updated-200KB", partUpdated(200 << 10), decoded{dir, "message.part.updated", ""}},
	{"part.updated-200KB-sorted-keys", partUpdatedSorted(200 << 10), decoded{dir, "message.part.updated", ""}},
	{"tools.changed", toolsChanged, decoded{dir, "mcp.tools.changed", "github"}},
}

func BenchmarkDecode(b *testing.B) {
	for _, in := range decodeInputs {
		for _, dec := range decoders {
			b.Run("input="+in.name+"/reader="+dec.name, func(b *testing.B) {
				decode := dec.new()
				b.SetBytes(int64(len(in.data)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := decode(in.data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// Every decoder gives the engine the same fields on the benchmark's inputs.
func TestDecodersAgree(t *testing.T) {
	for _, in := range decodeInputs {
		for _, dec := range decoders {
			got, err := dec.new()(in.data)
			if err != nil || got != in.want {
				t.Errorf("%s on %s = %+v, %v; want %+v", dec.name, in.name, got, err, in.want)
			}
		}
	}
}

// The head of an event over sse.MaxFrame (its first sse.MaxHead bytes,
// cut in the middle of the text) still says where a client is busy, and
// the stream acts on it (internal/opencode/stream.go, OnSkip). Only the
// decoders that read no further than they need can tell.
func TestDecodersOnACutHead(t *testing.T) {
	head := partUpdated(2 << 20)[:sse.MaxHead]
	want := map[string]bool{"ParseEvent": true, "gjson": true, "fastjson": false, "encoding-json": false}
	for _, dec := range decoders {
		got, err := dec.new()(head)
		ok := err == nil && got == decoded{dir, "message.part.updated", ""}
		t.Logf("%-13s on the first %d bytes of a 2 MB message.part.updated: %+v, %v", dec.name, len(head), got, err)
		if ok != want[dec.name] {
			t.Errorf("%s on a cut head: %+v, %v; want decoded %v", dec.name, got, err, want[dec.name])
		}
	}
}

// The generators are those of internal/opencode/events_bench_test.go:
// these are the sizes and digests its inputs have.
func TestInputsMatchTheProjectBenchmark(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"part.updated-200KB", partUpdated(200 << 10), "238524 f94220e169b9ac453573cd6b106b19bab2242481d9c57563b6ebe98fb4cc1fd5"},
		{"part.updated-200KB-sorted-keys", partUpdatedSorted(200 << 10), "238524 0ae727229db8b2385f9412e6bbc6f4f1af16468f02928697b33ed7fa87b0a4fc"},
	} {
		if got := fmt.Sprintf("%d %x", len(tc.data), sha256.Sum256(tc.data)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
