package doctor

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// The 2.x client chooses each directory with ?location[directory]=D on
// every location-scoped route. An OpenCode 2 whose description no longer
// takes that parameter on GET /api/mcp would answer every read for its
// own home, whatever directory the daemon names: doctor exists to catch
// such an upgrade by a command, not by a silent failure, so it fails.
func TestDoctorFailsWhenTheStatusRouteTakesNoLocationParameter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := os.ReadFile("../opencode/fakeopencode/fake2/testdata/opencode-2.1.2-openapi.json")
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		op := d["paths"].(map[string]any)["/api/mcp"].(map[string]any)["get"].(map[string]any)
		op["parameters"] = []any{}
		doc, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		const pw = "fake2-password-never-printed"
		fake := fake2.New(nil)
		fake.Password = pw
		tr, stop := fake.Serve()
		defer stop()
		fake.SetDoc(doc)
		checks := Run(context.Background(), fake2.URL, opencode.Options{Password: pw, Transport: tr}, Options{})
		var lines []string
		for _, c := range checks {
			lines = append(lines, string(c.Severity)+" "+c.Name+": "+c.Detail)
			if c.Severity == Fail && strings.Contains(c.Detail, "location[directory]") && strings.Contains(c.Detail, "/api/mcp") {
				return
			}
		}
		t.Fatalf("doctor does not fail on a description whose GET /api/mcp takes no location[directory]:\n%s", strings.Join(lines, "\n"))
	})
}

// The 2.x client reads GET /api/mcp's answer as {"location", "data":
// [{"name", "status": {"status"}}]}. An OpenCode 2 whose description
// answers that route without "data" would be read as listing no server:
// doctor fails, naming the shape the daemon reads.
func TestDoctorFailsWhenTheStatusAnswerHasNoData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := os.ReadFile("../opencode/fakeopencode/fake2/testdata/opencode-2.1.2-openapi.json")
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		op := d["paths"].(map[string]any)["/api/mcp"].(map[string]any)["get"].(map[string]any)
		s := op["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
		delete(s["properties"].(map[string]any), "data")
		doc, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		const pw = "fake2-password-never-printed"
		fake := fake2.New(nil)
		fake.Password = pw
		tr, stop := fake.Serve()
		defer stop()
		fake.SetDoc(doc)
		checks := Run(context.Background(), fake2.URL, opencode.Options{Password: pw, Transport: tr}, Options{})
		var lines []string
		for _, c := range checks {
			lines = append(lines, string(c.Severity)+" "+c.Name+": "+c.Detail)
			if c.Severity == Fail && strings.Contains(c.Detail, `"data"`) {
				return
			}
		}
		t.Fatalf("doctor does not fail on a description whose GET /api/mcp answers without \"data\":\n%s", strings.Join(lines, "\n"))
	})
}
