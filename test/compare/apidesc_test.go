package compare

// The API description reader (internal/opencode/apidesc) against two
// maintained OpenAPI 3.1 libraries, on the three descriptions the daemon
// is built against (results in BENCHMARKS.md).

import (
	"os"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/apidesc"
	"github.com/pb33f/libopenapi"
)

var descriptions = []struct{ name, file string }{
	{"1.18.34", "../../internal/doctor/testdata/opencode-1.18.34-openapi.json"},
	{"preview", "../../internal/opencode/fakeopencode/fake2/testdata/opencode-v2-preview-openapi.json"},
	{"2.1.2", "../../internal/opencode/fakeopencode/fake2/testdata/opencode-2.1.2-openapi.json"},
}

// parsers each read a description into what answers the questions: the
// route table and resolved schemas.
var parsers = []struct {
	name  string
	parse func([]byte) error
}{
	{"apidesc", func(b []byte) error { _, err := apidesc.Parse(b); return err }},
	{"libopenapi", func(b []byte) error {
		doc, err := libopenapi.NewDocument(b)
		if err != nil {
			return err
		}
		_, err = doc.BuildV3Model()
		return err
	}},
	{"kin-openapi", func(b []byte) error {
		_, err := openapi3.NewLoader().LoadFromData(b)
		return err
	}},
}

func readDescription(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every parser reads every description (OpenAPI 3.1: type arrays, const,
// anyOf of $refs, contentSchema).
func TestParsersReadTheDescriptions(t *testing.T) {
	for _, d := range descriptions {
		b := readDescription(t, d.file)
		for _, p := range parsers {
			if err := p.parse(b); err != nil {
				t.Errorf("%s on %s: %v", p.name, d.name, err)
			}
		}
	}
}

// The question doctor asks hardest, which MCP statuses GET /api/mcp's
// answer allows (data[].status, an anyOf of $refs, each a one-value enum),
// answered by each library's model on the 2.1.2 description; and the 3.1
// keyword the preview's event stream needed (contentSchema).
func TestLibrariesAnswerTheStatuses(t *testing.T) {
	b := readDescription(t, descriptions[2].file)
	preview := readDescription(t, descriptions[1].file)
	want := []string{"connected", "disabled", "failed", "needs_auth", "pending"}

	d, _ := apidesc.Parse(b)
	got := d.Answers("GET", "/api/mcp").Property("data").Items().Property("status").Property("status").Literals()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("apidesc: %v", got)
	}

	kin, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	data := kin.Paths.Find("/api/mcp").Get.Responses.Status(200).Value.Content["application/json"].Schema.Value.Properties["data"].Value
	for _, s := range data.Items.Value.Properties["status"].Value.AnyOf {
		for _, e := range s.Value.Properties["status"].Value.Enum {
			got = append(got, e.(string))
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("kin-openapi: %v", got)
	}
	if kinPreview, err := openapi3.NewLoader().LoadFromData(preview); err != nil || kinPreview.Components.Schemas["V2EventJsonString"].Value.ContentSchema == nil {
		t.Errorf("kin-openapi: no contentSchema (%v)", err)
	}

	doc, err := libopenapi.NewDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	resp := m.Model.Paths.PathItems.GetOrZero("/api/mcp").Get.Responses.Codes.GetOrZero("200")
	items := resp.Content.GetOrZero("application/json").Schema.Schema().Properties.GetOrZero("data").Schema().Items.A.Schema()
	for _, s := range items.Properties.GetOrZero("status").Schema().AnyOf {
		for _, e := range s.Schema().Properties.GetOrZero("status").Schema().Enum {
			got = append(got, e.Value)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("libopenapi: %v", got)
	}
	pdoc, err := libopenapi.NewDocument(preview)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := pdoc.BuildV3Model()
	if err != nil || pm.Model.Components.Schemas.GetOrZero("V2EventJsonString").Schema().ContentSchema == nil {
		t.Errorf("libopenapi: no contentSchema (%v)", err)
	}
}

// BenchmarkParseDescription is one read of a description: what the 2.x
// client does at each detection (and again while the read fails), and
// doctor once per run.
func BenchmarkParseDescription(b *testing.B) {
	for _, d := range descriptions {
		doc := readDescription(b, d.file)
		for _, p := range parsers {
			b.Run("doc="+d.name+"/parser="+p.name, func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				b.ReportAllocs()
				for b.Loop() {
					if err := p.parse(doc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
