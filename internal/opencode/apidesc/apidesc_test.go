package apidesc_test

import (
	"os"
	"slices"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/apidesc"
)

// The descriptions the daemon is built against, each recorded from the
// real server: 1.18.34's GET /doc, 2.1.2's and the v2 preview build's GET
// /openapi.json.
var references = map[string]string{
	"1.18.34": "../../doctor/testdata/opencode-1.18.34-openapi.json",
	"2.1.2":   "../fakeopencode/fake2/testdata/opencode-2.1.2-openapi.json",
	"preview": "../fakeopencode/fake2/testdata/opencode-v2-preview-openapi.json",
}

func reference(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(references[name])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReferences(t *testing.T) {
	for name, want := range map[string]struct {
		paths  int
		offers [][2]string
	}{
		"1.18.34": {162, [][2]string{{"GET", "/mcp"}, {"post", "/mcp/{x}/connect"}, {"GET", "/global/event"}}},
		"preview": {93, [][2]string{{"GET", "/api/health"}, {"POST", "/api/mcp/{name}/connect"}, {"GET", "/api/debug/location"}, {"DELETE", "/api/debug/location"}}},
		"2.1.2":   {119, [][2]string{{"GET", "/api/info"}, {"POST", "/api/experimental/mcp/{name}/connect"}, {"GET", "/api/config"}, {"GET", "/api/debug/location"}}},
	} {
		d, err := apidesc.Parse(reference(t, name))
		if err != nil || len(d.Paths()) != want.paths {
			t.Fatalf("%s: %d paths, %v; want %d", name, len(d.Paths()), err, want.paths)
		}
		for _, r := range want.offers {
			if _, ok := d.Offers(r[0], r[1]); !ok {
				t.Errorf("%s: %s %s not offered", name, r[0], r[1])
			}
		}
		if _, ok := d.Offers("PATCH", "/api/mcp"); ok {
			t.Errorf("%s: offers PATCH /api/mcp", name)
		}
	}
	// The questions doctor asks, on the preview's real description.
	d, _ := apidesc.Parse(reference(t, "preview"))
	status := d.Answers("GET", "/api/mcp").Property("data").Items().Property("status").Property("status").Literals()
	if !slices.Contains(status, "needs_client_registration") || !slices.Contains(status, "pending") {
		t.Errorf("statuses %v", status)
	}
	stream := d.Answers("GET", "/api/event")
	if types := stream.Join(stream.Property("data")).Property("type").Literals(); !slices.Contains(types, "mcp.status.changed") || !slices.Contains(types, "session.execution.started") {
		t.Errorf("event types %v", types)
	}
	var loc *apidesc.Param
	for _, p := range d.Params("GET", "/api/mcp") {
		if p.Name == "location" {
			loc = &p
		}
	}
	if loc == nil || loc.In != "query" || loc.Style != "deepObject" || loc.Schema.Property("directory").Len() == 0 {
		t.Errorf("location parameter %+v", loc)
	}
}

// A nil description finds nothing, and so does a part of another shape.
func TestNothingFound(t *testing.T) {
	var d *apidesc.Doc
	if _, ok := d.Offers("GET", "/api/mcp"); ok || d.Paths() != nil || d.Answers("GET", "/x").Len() != 0 || len(d.ComponentNames()) != 0 {
		t.Fatal("a nil description found something")
	}
	d, err := apidesc.Parse([]byte(`{"paths":{"/a":{"get":null,"post":[]},"/b":3},"components":{"schemas":{"L":{"$ref":"#/components/schemas/L"},"X":{"anyOf":[{"$ref":"elsewhere.json#/x"},{"$ref":"#/nowhere"}]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Offers("GET", "/a"); ok {
		t.Error("a null operation is offered")
	}
	if _, ok := d.Offers("POST", "/a"); ok {
		t.Error("an array operation is offered")
	}
	if v := d.Components("L", "X").Property("type").Literals(); len(v) != 0 {
		t.Errorf("literals %v from cyclic and dangling refs", v)
	}
	for doc, why := range map[string]string{"": "not JSON (at byte 0)", "[]": "not a JSON object", `{"paths":[]}`: `no "paths" object`} {
		if _, err := apidesc.Parse([]byte(doc)); err == nil || err.Error() != why {
			t.Errorf("Parse(%q) = %v, want %q", doc, err, why)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(reference(f, "2.1.2"))
	f.Add([]byte(`{"paths":{"/api/mcp/{server}/connect":{"post":{}},"/api/x":{"get":null,"GET":{}}}}`))
	f.Add([]byte(`{"paths":{"api/x":{"get":{}},"/api/y":[],"/api/z":{"fetch":{}}}}`))
	f.Add([]byte(`{"paths":{"/a":{"$ref":"#/paths/~1a"}},"components":{"schemas":{"A":{"allOf":[{"$ref":"#/components/schemas/A"}],"contentSchema":{"items":{"enum":["x",1]}}}}}}`))
	f.Add([]byte(`<!doctype html>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := apidesc.Parse(b)
		if (err == nil) == (d == nil) {
			t.Fatalf("description %v with error %v", d, err)
		}
		for _, p := range d.Paths() {
			if q, ok := d.Offers("GET", p); ok && apidesc.Template(q) != apidesc.Template(p) {
				t.Fatalf("GET %s offered as %q", p, q)
			}
			_ = d.Params("GET", p)
			_ = d.Answers("GET", p).Property("data").Items().Literals()
		}
		_ = d.Components(d.ComponentNames()...).Property("type").Literals()
	})
}

// BenchmarkParse is the cost of one read of each reference description
// (BENCHMARKS.md compares it with two OpenAPI libraries, in test/compare).
func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"1.18.34", "preview", "2.1.2"} {
		doc := reference(b, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := apidesc.Parse(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
