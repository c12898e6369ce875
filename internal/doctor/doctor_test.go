package doctor

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func refDoc(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/opencode-1.18.34-openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edit applies f to the decoded reference document.
func edit(t *testing.T, f func(d map[string]any)) []byte {
	var d map[string]any
	if err := json.Unmarshal(refDoc(t), &d); err != nil {
		t.Fatal(err)
	}
	f(d)
	b, _ := json.Marshal(d)
	return b
}

func TestReferenceDocFits(t *testing.T) {
	checks := checkDoc(refDoc(t), needV1)
	if !Healthy(checks) {
		t.Fatalf("the 1.18.34 description does not fit: %+v", checks)
	}
	for _, c := range checks {
		if c.Severity != OK {
			t.Errorf("not ok: %+v", c)
		}
	}
}

func TestMissingRouteFails(t *testing.T) {
	doc := edit(t, func(d map[string]any) {
		delete(d["paths"].(map[string]any)["/mcp/{name}/connect"].(map[string]any), "post")
	})
	checks := checkDoc(doc, needV1)
	if Healthy(checks) || !strings.Contains(describe(checks), "POST /mcp/{name}/connect") {
		t.Fatalf("checks = %s", describe(checks))
	}
}

func TestStatusChangesAreCaught(t *testing.T) {
	schemas := func(d map[string]any) map[string]any {
		return d["components"].(map[string]any)["schemas"].(map[string]any)
	}
	// A status the server never reports is harmless; `failed` gone
	// leaves the daemon nothing to retry; a status it does not know
	// would be left alone, whatever it means.
	doc := edit(t, func(d map[string]any) { delete(schemas(d), "MCPStatusNeedsAuth") })
	if c := checkDoc(doc, needV1); !Healthy(c) || !strings.Contains(describe(c), "info mcp statuses: MCP status `needs_auth` is not in the MCPStatus schemas") {
		t.Fatalf("a status gone: %s", describe(c))
	}
	doc = edit(t, func(d map[string]any) { delete(schemas(d), "MCPStatusFailed") })
	if c := describe(checkDoc(doc, needV1)); !strings.Contains(c, "FAIL mcp statuses: MCP status `failed` is not in the MCPStatus schemas") {
		t.Fatalf("failed gone: %s", c)
	}
	doc = edit(t, func(d map[string]any) {
		schemas(d)["MCPStatusPaused"] = map[string]any{"type": "object", "properties": map[string]any{"status": map[string]any{"type": "string", "enum": []any{"paused"}}}}
	})
	if c := describe(checkDoc(doc, needV1)); !strings.Contains(c, "FAIL mcp statuses: MCP status `paused` in the MCPStatus schemas is unknown to mcp-reconnect") {
		t.Fatalf("a new status: %s", c)
	}
}

func TestGarbageDoc(t *testing.T) {
	for _, doc := range []string{"", "[]", "null", "<html>", `{"paths": 3}`} {
		if Healthy(checkDoc([]byte(doc), needV1)) {
			t.Errorf("checkDoc(%q) is healthy", doc)
		}
	}
}

// Whatever the description, checkDoc gives a verdict of known
// severities, for either generation's needs.
func FuzzCheckDoc(f *testing.F) {
	// Small seeds: the fuzzer minimises every interesting input, which
	// for a recorded description takes minutes per input.
	f.Add([]byte(`{"paths":{"/mcp":{"get":{}}},"components":{"schemas":{"MCPStatusX":{"properties":{"status":{"enum":["x"]}}}}}}`))
	f.Add([]byte(`{"paths":{},"components":{"schemas":{"A":[{"enum":[1,"b"]}]}}}`))
	f.Add([]byte(componentsOnlyDoc))
	f.Add([]byte(`{"paths":{"/api/{a}/{b}":{"parameters":[{"$ref":"#/paths/~1api~1{a}~1{b}/parameters/0"}],"post":{"parameters":"x"}}},` +
		`"components":{"schemas":{"Mcp.Status":{"anyOf":[{"$ref":"#/components/schemas/Mcp.Status"}],"properties":{"status":{"allOf":[{"enum":[2,"x"]}],"const":"failed"}}}}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, need := range []needs{needV1, needV2(caps212(t))} {
			checks := checkDoc(doc, need)
			if len(checks) == 0 {
				t.Fatal("no verdict")
			}
			for _, c := range checks {
				if c.Severity != OK && c.Severity != Warn && c.Severity != Fail && c.Severity != Info {
					t.Fatalf("severity %q", c.Severity)
				}
			}
		}
	})
}

func describe(checks []Check) string {
	var b strings.Builder
	for _, c := range checks {
		b.WriteString(c.Severity + " " + c.Name + ": " + c.Detail + "\n")
	}
	return b.String()
}

// The 1.x path through Run: detection, the version and /doc checks, a
// named directory, a wrong password, an unreachable URL.
func TestRunAgainstFake(t *testing.T) {
	const pw = "v1-password-never-printed"
	synctest.Test(t, func(t *testing.T) {
		fake := fakeopencode.New(map[string]fakeopencode.Spec{"gh": {Status: "needs_auth"}, "ok": {}})
		fake.Password = pw
		fake.SetDoc(refDoc(t))
		tr, stop := fake.Serve()
		defer stop()
		checks := Run(context.Background(), fakeopencode.URL, opencode.Options{Password: pw, Transport: tr},
			Options{Directories: []string{"/p"}, PasswordSource: "env OPENCODE_SERVER_PASSWORD"})
		d := describe(checks)
		for _, want := range []string{
			"ok generation: OpenCode 1.x, version 1.18.34", "ok version: 1.18.34", "ok api routes:",
			"ok password: from env OPENCODE_SERVER_PASSWORD", "FAIL /p: gh: needs_auth: run: opencode mcp auth gh",
			"ok event stream: GET /global/event answers; its first event is server.connected",
		} {
			if !strings.Contains(d, want) {
				t.Errorf("no %q in:\n%s", want, d)
			}
		}
		if Healthy(checks) || strings.Contains(d, pw) {
			t.Fatalf("checks:\n%s", d)
		}
		if fake.Count("/mcp", "/q", "") != 0 {
			t.Fatal("doctor read a directory nobody named")
		}
		checks = Run(context.Background(), fakeopencode.URL, opencode.Options{Password: "nope", Transport: tr}, Options{PasswordSource: "--password"})
		if Healthy(checks) || !strings.Contains(describe(checks), "OPENCODE_SERVER_PASSWORD") {
			t.Fatalf("wrong password:\n%s", describe(checks))
		}
	})
	if checks := Run(context.Background(), "http://127.0.0.1:1", opencode.Options{}, Options{}); Healthy(checks) || !strings.Contains(describe(checks), "--url") {
		t.Fatalf("unreachable:\n%s", describe(checks))
	}
}

// The report quotes OpenCode (server names, directories) and MCP servers
// (their error strings): one line per check, whatever they hold, and no
// control character reaches the terminal.
func TestWriteEscapesControlCharacters(t *testing.T) {
	var b strings.Builder
	Write(&b, serverCheck("/p\x1b]0;t\x07", "s\u202e", opencode.StatusFailed, "HTTP 400: \x1b]52;c;eA==\x07\r\x1b[2Kfine\nnext\u009b", 2))
	out := b.String()
	if strings.Count(out, "\n") != 1 || strings.ContainsFunc(out, func(r rune) bool {
		return r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f || r == '\u202e'
	}) {
		t.Fatalf("Write printed %q", out)
	}
	if !strings.Contains(out, `\x1b]52;c;eA==\x07\r`) || !strings.Contains(out, `s\u202e`) {
		t.Fatalf("Write hides what the server said: %q", out)
	}
}

// urlOnly is an OpenCode client doctor was pointed at, spelled as the
// user typed it.
type urlOnly string

func (u urlOnly) URL() string { return string(u) }
func (urlOnly) MCPStatus(context.Context, string) (map[string]opencode.ServerStatus, error) {
	return nil, nil
}
func (urlOnly) FirstEvent(context.Context, time.Duration) (string, error) { return "", nil }
func (urlOnly) Doc(context.Context) ([]byte, error)                       { return nil, nil }

// doctor --url http://localhost:4096 while the daemon watches
// http://127.0.0.1:4096 (its default): the registry finds that daemon by
// the normalised URL, and doctor reads the daemon's view of that server
// the same way -- its failed servers and one in a status mcp-reconnect
// does not know are reported (FAIL), not dropped for the spelling. A
// daemon that watches another server says so.
func TestDoctorReadsTheDaemonsViewOfTheSameServerSpelledOtherwise(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(statusapi.Status{Servers: []statusapi.ServerStatus{{Snapshot: reconnect.Snapshot{URL: "http://127.0.0.1:4096",
			Directories: []reconnect.DirSnapshot{{Directory: "/p", Servers: []reconnect.ServerSnapshot{
				{Name: "gh", Status: "failed", Error: "Connection closed", Attempts: 5},
				{Name: "odd", Status: "paused"},
			}}}}}}})
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	o := Options{Daemon: &statusapi.Client{Addr: l.Addr().String()}}
	for _, spelled := range []string{"http://localhost:4096", "HTTP://127.0.0.1:4096/"} {
		d := describe(serverChecks(context.Background(), urlOnly(spelled), o))
		if !strings.Contains(d, "FAIL /p: gh") || !strings.Contains(d, "FAIL /p: odd") {
			t.Errorf("doctor --url %s, the daemon watching http://127.0.0.1:4096 sees gh failed and odd in an unknown status; doctor says:\n%s", spelled, d)
		}
	}
	// A daemon (--status-addr) that watches another server says so.
	if d := describe(serverChecks(context.Background(), urlOnly("http://127.0.0.1:4097"), o)); !strings.Contains(d, "warn daemon: the mcp-reconnect daemon at "+l.Addr().String()+" does not watch http://127.0.0.1:4097") {
		t.Errorf("doctor --url http://127.0.0.1:4097, the daemon watching http://127.0.0.1:4096; doctor says:\n%s", d)
	}
}
