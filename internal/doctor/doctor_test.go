package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"go.uber.org/goleak"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
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
func (urlOnly) MCPStatus(context.Context, string) (map[string]opencode.MCPServerStatus, error) {
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
		_ = json.NewEncoder(w).Encode(statusapi.Status{Servers: []statusapi.OpenCodeStatus{{Snapshot: reconnect.Snapshot{URL: "http://127.0.0.1:4096",
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

// ("--reap … only processes of this user whose parentage proves they
// are orphans"; a config file owned by another user is refused, as ssh
// does.) Doctor reads the MCP
// config of the working directory of every adopted process of the user,
// so one such process whose cwd is /tmp makes it read /tmp/opencode.json,
// which any local user may write, and take its "local servers" as the
// user's; adopted processes anywhere are then matched by command alone.
// Another user reads ana's argv in /proc, names her emacs daemon (adopted
// by systemd --user, no MCP server at all) as a server there, and
// `doctor --reap --yes` ends it. (Needs root here, to make a file of
// another user.)
func TestAnotherUsersConfigCannotMakeDoctorReap(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("making a file owned by another user needs root: CI runs as root")
		}
		t.Skip("making a file owned by another user needs root")
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("OPENCODE_TEST_MANAGED_CONFIG_DIR", t.TempDir())
	t.Setenv("OPENCODE_CONFIG_DIR", "")
	t.Setenv("OPENCODE_CONFIG", "")
	t.Setenv("OPENCODE_CONFIG_CONTENT", "")
	tmp := filepath.Join(t.TempDir(), "tmp") // stands for /tmp
	must(t, os.Mkdir(tmp, 0o777|os.ModeSticky))
	must(t, os.Chmod(tmp, 0o777|os.ModeSticky))
	evil := filepath.Join(tmp, "opencode.json")
	must(t, os.WriteFile(evil, []byte(`{"mcp":{"x":{"type":"local","command":["/usr/bin/emacs","--daemon"]}}}`), 0o644))
	must(t, os.Chown(evil, 4242, 4242)) // bo's file

	root := t.TempDir()
	writeTree(t, root, []fakeProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Comm: "systemd", Cwd: "/"},
		{PID: 900, PPID: 1, UID: ana, Start: 900, Argv: []string{"/usr/lib/systemd/systemd", "--user"}, Comm: "systemd", Cwd: "/"},
		{PID: 3004, PPID: 1, UID: ana, Start: 50004, Argv: []string{"sleep", "600"}, Cwd: tmp},
		{PID: 3100, PPID: 900, UID: ana, Start: 50100, Argv: []string{"/usr/bin/emacs", "--daemon"}, Cwd: "/home/ana"},
	})
	o := Options{ProcessTable: func() (procview.Table, error) { return procview.ProcFS(root) }, UID: ana}
	_, checks := FindProcesses(context.Background(), o)
	fr := &fakeReap{}
	var report bytes.Buffer
	if err := Reap(context.Background(), o, ReapOptions{Yes: true, Report: &report, reap: fr.reap}); err != nil {
		t.Fatal(err)
	}
	if len(fr.ended) != 0 {
		t.Fatalf("doctor --reap --yes ended %v on the word of %s, another user's file:\n%s%s", fr.ended, evil, describe(checks), report.String())
	}
}

// Doctor tells the user what status and the daemon's events tell them:
// which statuses need them, and the fix, come from opencode alone. Doctor
// once worded needs_client_registration's fix otherwise; its answer is
// pinned here, and every other status is held to the owner's list.
func TestServerCheckAsksTheStatusOwner(t *testing.T) {
	got := serverCheck("/p", "reg", opencode.StatusNeedsClientRegistration, "", 0)
	want := []Check{{Fail, "/p: reg", "needs_client_registration: the server needs a registered OAuth client: add clientId to its config in opencode.json"}}
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("needs_client_registration: %+v, want %+v", got, want)
	}
	for _, status := range opencode.StatusesV2 {
		got := serverCheck("/p", "my srv", status, "", 0)
		hint := opencode.UserHint(status, "my srv")
		switch {
		case status == opencode.StatusFailed:
			if len(got) != 1 || got[0].Severity != Fail {
				t.Errorf("%s: %+v, want a failure", status, got)
			}
		case hint != "":
			if len(got) != 1 || got[0] != (Check{Fail, "/p: my srv", status + ": " + hint}) {
				t.Errorf("%s: %+v, want a failure with opencode's hint %q", status, got, hint)
			}
		case len(got) != 0:
			t.Errorf("%s is known and needs no user: %+v", status, got)
		}
	}
	if got := serverCheck("/p", "x", "disconnected", "", 0); len(got) != 1 || got[0].Severity != Fail {
		t.Errorf("a status opencode does not know: %+v, want a failure", got)
	}
}

// refDocV2 is OpenCode 2.1.2's own description, recorded (the 2.x fake's
// default serves it).
func refDocV2(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../opencode/fakeopencode/fake2/testdata/opencode-2.1.2-openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// editV2 applies f to the decoded 2.x reference document.
func editV2(t *testing.T, f func(d map[string]any)) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(refDocV2(t), &d); err != nil {
		t.Fatal(err)
	}
	f(d)
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkDocV2 is checkDoc of doc against what the 2.x client relies on.
func checkDocV2(t testing.TB, doc []byte) []Check {
	t.Helper()
	return checkDoc(doc, needV2(caps212(t)))
}

// caps212 are the 2.x client's capabilities before any call: 2.1.2's
// routes.
func caps212(t testing.TB) []opencode.Capability {
	c, err := opencode.NewV2("http://127.0.0.1:1", opencode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Capabilities()
}

// Accessors into a decoded document, for the edits.
func paths(d map[string]any) map[string]any { return d["paths"].(map[string]any) }
func schemas(d map[string]any) map[string]any {
	return d["components"].(map[string]any)["schemas"].(map[string]any)
}
func opOf(d map[string]any, path, method string) map[string]any {
	return paths(d)[path].(map[string]any)[method].(map[string]any)
}

// notOK are the checks that are neither ok nor info.
func notOK(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if c.Severity != OK && c.Severity != Info {
			out = append(out, c)
		}
	}
	return out
}

func find(checks []Check, name string) []Check {
	var out []Check
	for _, c := range checks {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

const (
	mcpList    = "/api/mcp"
	connectExp = "/api/experimental/mcp/{server}/connect"
	config     = "/api/config"
)

// OpenCode 2.1.2's own description fits: every line ok or info, and each
// says what it found. The status it lacks (needs_client_registration) is
// one it never reports: no failure.
func TestRecordedDescriptionV2Fits(t *testing.T) {
	checks := checkDocV2(t, refDocV2(t))
	if bad := notOK(checks); len(bad) > 0 {
		t.Fatalf("the 2.1.2 description does not fit: %s", describe(bad))
	}
	want := []Check{
		{OK, "api routes", "GET /api/info, GET /api/mcp, POST /api/experimental/mcp/{name}/connect, GET /api/config, GET /api/event, GET /api/debug/location"},
		{OK, "mcp statuses", "connected, pending, disabled, failed, needs_auth"},
		{Info, "mcp statuses", "MCP status `needs_client_registration` is not in the MCPStatus schemas: this OpenCode never reports it"},
		{Info, "event types", "the description names none; mcp.status.changed, location.shutdown and session.* are seen only when they happen"},
	}
	if !slices.Equal(checks, want) {
		t.Fatalf("checks:\n%s\nwant:\n%s", describe(checks), describe(want))
	}
}

// componentsOnlyDoc is a 2.x description without answer schemas: the
// statuses and events only as members of one component schema each, as a
// hand-written description may give them.
const componentsOnlyDoc = `{
  "openapi": "3.1.0",
  "info": {"title": "opencode", "version": "2.0.21"},
  "paths": {
    "/api/info": {"get": {"operationId": "server.info", "responses": {"200": {"description": "info"}}}},
    "/api/mcp": {"get": {"operationId": "mcp.list",
      "parameters": [{"name": "location[directory]", "in": "query", "required": false, "schema": {"type": "string"}},
                     {"name": "x-opencode-directory", "in": "header", "required": false, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "status"}}}},
    "/api/experimental/mcp/{name}/connect": {"post": {"operationId": "mcp.connect",
      "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                     {"name": "location[directory]", "in": "query", "required": false, "schema": {"type": "string"}}],
      "responses": {"204": {"description": "connected"}, "404": {"description": "McpServerNotFoundError"}}}},
    "/api/experimental/mcp/{name}/disconnect": {"post": {"operationId": "mcp.disconnect",
      "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"204": {"description": "disconnected"}}}},
    "/api/config": {"get": {"operationId": "config.get",
      "parameters": [{"name": "location[directory]", "in": "query", "required": false, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "config layers"}}}},
    "/api/event": {"get": {"operationId": "event.subscribe", "responses": {"200": {"description": "event stream"}}}},
    "/api/debug/location": {"get": {"operationId": "location.list", "responses": {"200": {"description": "booted locations"}}}}
  },
  "components": {"schemas": {
    "McpStatus": {"anyOf": [
      {"type": "object", "properties": {"status": {"const": "connected"}}},
      {"type": "object", "properties": {"status": {"const": "pending"}}},
      {"type": "object", "properties": {"status": {"const": "disabled"}}},
      {"type": "object", "properties": {"status": {"const": "failed"}, "error": {"type": "string"}}},
      {"type": "object", "properties": {"status": {"const": "needs_auth"}}},
      {"type": "object", "properties": {"status": {"const": "needs_client_registration"}, "error": {"type": "string"}}}]},
    "Event": {"anyOf": [
      {"type": "object", "properties": {"type": {"const": "server.connected"}}},
      {"type": "object", "properties": {"type": {"const": "mcp.status.changed"}}},
      {"type": "object", "properties": {"type": {"const": "location.shutdown"}}},
      {"type": "object", "properties": {"type": {"const": "session.execution.started"}}},
      {"type": "object", "properties": {"type": {"const": "session.execution.succeeded"}}},
      {"type": "object", "properties": {"type": {"const": "session.execution.failed"}}},
      {"type": "object", "properties": {"type": {"const": "session.execution.interrupted"}}}]}
  }}
}
`

// A description whose statuses are one component schema's anyOf members
// (as a hand-written description may give them) fits too.
func TestDescriptionWithoutAnswerSchemasFits(t *testing.T) {
	checks := checkDocV2(t, []byte(componentsOnlyDoc))
	if bad := notOK(checks); len(bad) > 0 {
		t.Fatalf("the description does not fit: %s", describe(bad))
	}
	if c := find(checks, "mcp statuses"); len(c) != 1 || c[0].Severity != OK {
		t.Fatalf("statuses: %s", describe(checks))
	}
}

// Each change to the description gives exactly the line that names it,
// and nothing else that is not ok.
func TestDocV2Changes(t *testing.T) {
	type tc struct {
		name string
		edit func(d map[string]any)
		want []Check
	}
	cases := []tc{
		{"no version route", func(d map[string]any) { delete(paths(d), "/api/info") },
			[]Check{{Warn, "api routes", "OpenCode does not describe GET /api/info (version); mcp-reconnect runs without it: the version found at detection is kept"}}},
		{"no GET /api/mcp", func(d map[string]any) { delete(paths(d), mcpList) },
			[]Check{{Fail, "api routes", "OpenCode does not describe GET /api/mcp (mcp-status); mcp-reconnect runs without it: no MCP server can be checked"}}},
		{"GET /api/mcp became POST", func(d map[string]any) {
			item := paths(d)[mcpList].(map[string]any)
			item["post"] = item["get"]
			delete(item, "get")
		}, []Check{{Fail, "api routes", "OpenCode does not describe GET /api/mcp (mcp-status); mcp-reconnect runs without it: no MCP server can be checked"}}},
		{"no GET /api/config", func(d map[string]any) { delete(paths(d), config) },
			[]Check{{Warn, "api routes", "OpenCode does not describe GET /api/config (config); mcp-reconnect runs without it: server kinds unknown: every server is budgeted as local, remote endpoints are not probed, a restarted remote server is not repaired"}}},
		{"no GET /api/event", func(d map[string]any) { delete(paths(d), "/api/event") },
			[]Check{{Fail, "api routes", "OpenCode does not describe GET /api/event (events); mcp-reconnect runs without it: directories are checked on the idle interval only"}}},
		{"no connect route", func(d map[string]any) { delete(paths(d), connectExp) },
			[]Check{{Fail, "api routes", "OpenCode does not describe POST /api/experimental/mcp/{name}/connect (connect); mcp-reconnect runs without it: no MCP server can be reconnected"}}},
		{"no booted-location list", func(d map[string]any) { delete(paths(d), "/api/debug/location") },
			[]Check{{Warn, "api routes", "OpenCode does not describe GET /api/debug/location (locations); mcp-reconnect runs without it: a disposed location cannot be told from a booted one without booting it"}}},
		{"a new status", func(d map[string]any) {
			sc := schemas(d)
			sc["Mcp.Status.Paused"] = map[string]any{"type": "object", "properties": map[string]any{"status": map[string]any{"type": "string", "enum": []any{"paused"}}}}
			st := sc["Mcp.Server"].(map[string]any)["properties"].(map[string]any)["status"].(map[string]any)
			st["anyOf"] = append(st["anyOf"].([]any), map[string]any{"$ref": "#/components/schemas/Mcp.Status.Paused"})
		}, []Check{{Fail, "mcp statuses", "MCP status `paused` in the MCPStatus schemas is unknown to mcp-reconnect: it would leave a server in it alone, whatever it means (a renamed `failed` would never be retried)"}}},
		{"pending renamed", func(d map[string]any) {
			schemas(d)["Mcp.Status.Pending"].(map[string]any)["properties"].(map[string]any)["status"] = map[string]any{"const": "xyz"}
		}, []Check{
			{Fail, "mcp statuses", "MCP status `xyz` in the MCPStatus schemas is unknown to mcp-reconnect: it would leave a server in it alone, whatever it means (a renamed `failed` would never be retried)"},
		}},
		{"failed renamed", func(d map[string]any) {
			schemas(d)["Mcp.Status.Failed"].(map[string]any)["properties"].(map[string]any)["status"] = map[string]any{"const": "errored"}
		}, []Check{
			{Fail, "mcp statuses", "MCP status `errored` in the MCPStatus schemas is unknown to mcp-reconnect: it would leave a server in it alone, whatever it means (a renamed `failed` would never be retried)"},
			{Fail, "mcp statuses", "MCP status `failed` is not in the MCPStatus schemas (found `connected`, `disabled`, `errored`, `needs_auth`, `pending`): mcp-reconnect reconnects only failed servers"},
		}},
		{"the status it lacks, added", func(d map[string]any) {
			sc := schemas(d)
			sc["Mcp.Status.NeedsClientRegistration"] = map[string]any{"type": "object", "properties": map[string]any{"status": map[string]any{"type": "string", "enum": []any{"needs_client_registration"}}}}
			st := sc["Mcp.Server"].(map[string]any)["properties"].(map[string]any)["status"].(map[string]any)
			st["anyOf"] = append(st["anyOf"].([]any), map[string]any{"$ref": "#/components/schemas/Mcp.Status.NeedsClientRegistration"})
		}, nil},
	}
	statusRef := map[string]string{"connected": "Connected", "pending": "Pending", "disabled": "Disabled", "failed": "Failed", "needs_auth": "NeedsAuth"}
	for s, ref := range statusRef {
		// Integration.AttemptStatus still lists "pending" and "failed":
		// that must not hide their absence here. Only `failed` is
		// missed: a status the server never reports is harmless.
		var want []Check
		if s == opencode.StatusFailed {
			want = []Check{{Fail, "mcp statuses", "MCP status `failed` is not in the MCPStatus schemas (found `connected`, `disabled`, `needs_auth`, `pending`): mcp-reconnect reconnects only failed servers"}}
		}
		cases = append(cases, tc{"status " + s + " gone", func(d map[string]any) { delete(schemas(d), "Mcp.Status."+ref) }, want})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := notOK(checkDocV2(t, editV2(t, c.edit)))
			if len(got) == 0 {
				got = nil
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got:\n%swant:\n%s", describe(got), describe(c.want))
			}
		})
	}
}

// A status schema that is only a $ref (a cycle, a dangling one, one
// outside the document) lists nothing: it neither hangs the check nor
// passes it.
func TestHostileRefs(t *testing.T) {
	doc := editV2(t, func(d map[string]any) {
		sc := schemas(d)
		sc["Mcp.Status.Failed"] = map[string]any{"$ref": "#/components/schemas/Loop"}
		sc["Loop"] = map[string]any{"anyOf": []any{map[string]any{"$ref": "#/components/schemas/Loop"}, map[string]any{"$ref": "#/components/schemas/Nowhere"}, map[string]any{"$ref": "other.json#/x"}}}
	})
	got := notOK(checkDocV2(t, doc))
	want := []Check{{Fail, "mcp statuses", "MCP status `failed` is not in the MCPStatus schemas (found `connected`, `disabled`, `needs_auth`, `pending`): mcp-reconnect reconnects only failed servers"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got:\n%s", describe(got))
	}
}

// A description that is not an OpenAPI document fails the description
// check, naming what is wrong with it, as Run reports it; one with no
// routes at all fails on every one of them.
func TestGarbageDocV2(t *testing.T) {
	for doc, why := range map[string]string{
		"":                     "not a JSON object",
		"<html>":               "not a JSON object",
		"[]":                   "not a JSON object",
		"null":                 `no "paths" object`,
		`{"paths": 3}`:         `no "paths" object`,
		`{"openapi": "3.1.0"}`: `no "paths" object`,
	} {
		synctest.Test(t, func(t *testing.T) {
			fake, oo := newFake2(t, nil)
			fake.SetDoc([]byte(doc))
			got := find(Run(context.Background(), fake2.URL, oo, Options{}), "api description")
			want := []Check{{Fail, "api description", "GET /openapi.json is not an OpenAPI document: " + why}}
			if !slices.Equal(got, want) {
				t.Errorf("description %q: %s", doc, describe(got))
			}
		})
	}
	if c := checkDocV2(t, []byte(`{"paths":{}}`)); Healthy(c) || len(find(c, "api routes")) != len(caps212(t)) {
		t.Errorf("empty paths: %s", describe(c))
	}
}

// --- Run against the 2.x fake ---

const v2pw = "fake2-password-never-printed"

func newFake2(t *testing.T, servers map[string]fake2.Spec) (*fake2.Server, opencode.Options) {
	fake := fake2.New(servers)
	fake.Password = v2pw
	tr, stop := fake.Serve()
	t.Cleanup(stop)
	return fake, opencode.Options{Password: v2pw, Transport: tr}
}

// The 2.x path through Run against OpenCode 2.1.2 (the fake's default,
// its recorded description): detection, generation and version, the
// /openapi.json checks, the routes the daemon uses, the event stream, the
// password's source, a named directory read through location[directory]
// (and only that one; read again, as its first read boots it and lists
// nothing yet). Nothing fails but the server that needs the user.
func TestRunAgainstFake2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, oo := newFake2(t, map[string]fake2.Spec{"gh": {Status: "needs_auth"}, "ok": {}})
		checks := Run(context.Background(), fake2.URL, oo, Options{Directories: []string{"/p"}, PasswordSource: "service file /s/service.json"})
		d := describe(checks)
		want := []Check{
			{OK, "password", "from service file /s/service.json"},
			{OK, "reachable", fake2.URL},
			{OK, "generation", "OpenCode 2.x, version 2.1.2 (pid 4194343)"},
			{OK, "authenticated", "credentials accepted"},
			{OK, "version", "2.1.2"},
		}
		want = append(want, checkDocV2(t, refDocV2(t))...)
		want = append(want, Check{OK, "event stream", "GET /api/event answers; its first event is server.connected"})
		want = append(want, Check{Fail, "/p: gh", "needs_auth: run: opencode mcp auth gh"})
		if !slices.Equal(checks, want) {
			t.Fatalf("checks:\n%swant:\n%s", d, describe(want))
		}
		if strings.Contains(d, v2pw) {
			t.Fatal("doctor printed the password")
		}
		if fake.Count(fake2.RouteMCP, "/p", "") != 2 || fake.Count(fake2.RouteMCP, "", "") != 2 || fake.Count(fake2.RouteConfig, "", "") != 0 {
			t.Fatalf("doctor read directories nobody named: %+v", fake.Requests())
		}
		for _, r := range fake.Requests() {
			if r.LegacyDirectory != "" || r.Route == fake2.RouteUnauthorized {
				t.Fatalf("request %+v", r)
			}
		}
	})
}

// Another version, and a server in a status the daemon does not know (a
// failure: doctor exits 1).
func TestRunAgainstFake2Variants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, oo := newFake2(t, map[string]fake2.Spec{"a": {}})
		fake.Version = "2.1.4"
		fake.SetStatusOverride(func(dir string) (int, string, bool) {
			return 200, `{"location":{"directory":"` + dir + `"},"data":[{"name":"a","status":{"status":"paused"}}]}`, false
		})
		checks := Run(context.Background(), fake2.URL, oo, Options{Directories: []string{"/p"}, PasswordSource: "--password"})
		want := []Check{
			{Warn, "version", "2.1.4; mcp-reconnect is tested with 2.1.2 (the checks below tell whether it still fits)"},
			{Fail, "/p: a", `status "paused" is unknown to mcp-reconnect: it leaves the server alone, whatever the status means`},
		}
		if got := notOK(checks); !slices.Equal(got, want) {
			t.Fatalf("got:\n%swant:\n%s", describe(got), describe(want))
		}
	})
}

// Credentials on 2.x: a wrong password and none are refused with the
// places a 2.x password comes from; a server with auth off is said so.
func TestRunAgainstFake2Credentials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, oo := newFake2(t, nil)
		wrong := oo
		wrong.Password = "nope"
		checks := Run(context.Background(), fake2.URL, wrong, Options{PasswordSource: "env OPENCODE_PASSWORD"})
		want := []Check{
			{OK, "password", "from env OPENCODE_PASSWORD"},
			{OK, "reachable", fake2.URL},
			{OK, "generation", "OpenCode 2.x (its version is not shown without the password)"},
			{Fail, "authenticated", `OpenCode 2.x refused the password from env OPENCODE_PASSWORD: OpenCode 2.x authenticates as user "opencode" with the password in ${XDG_STATE_HOME:-~/.local/state}/opencode/service.json (opencode service get password), or OPENCODE_PASSWORD for a foreground server; pass it with --password`},
		}
		if !slices.Equal(checks, want) {
			t.Fatalf("wrong password:\n%s", describe(checks))
		}
		none := oo
		none.Password = ""
		checks = Run(context.Background(), fake2.URL, none, Options{})
		if Healthy(checks) || !strings.Contains(describe(checks), "FAIL authenticated: OpenCode 2.x asks for a password and none was given") {
			t.Fatalf("no password:\n%s", describe(checks))
		}
		fake.SetPassword("")
		checks = Run(context.Background(), fake2.URL, none, Options{})
		if !Healthy(checks) || !slices.Contains(checks, Check{OK, "authenticated", "this OpenCode 2.x answers without a password"}) {
			t.Fatalf("auth off:\n%s", describe(checks))
		}
	})
}

// A 2.x server whose /openapi.json fails or is garbage fails the
// description check, loudly, and the rest of the report still runs (the
// daemon uses 2.1.2's routes whatever the description says).
func TestRunAgainstFake2BadDoc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, oo := newFake2(t, nil)
		fake.SetDoc([]byte("<!doctype html>"))
		checks := Run(context.Background(), fake2.URL, oo, Options{})
		got := notOK(checks)
		if len(got) != 1 || got[0] != (Check{Fail, "api description", "GET /openapi.json is not an OpenAPI document: not a JSON object"}) ||
			!slices.Contains(checks, Check{OK, "event stream", "GET /api/event answers; its first event is server.connected"}) {
			t.Fatalf("checks:\n%s", describe(checks))
		}
	})
}

// Shapes OpenAPI allows that the checker must read: an upper-case method
// key, two paths of the same shape of which only the second has the
// method.
func TestOpenAPIVariants(t *testing.T) {
	doc := editV2(t, func(d map[string]any) {
		item := paths(d)[config].(map[string]any)
		item["GET"] = item["get"]
		delete(item, "get")
		p := paths(d)
		p["/api/experimental/mcp/{name}/connect"] = map[string]any{"delete": map[string]any{}}
	})
	if bad := notOK(checkDocV2(t, doc)); len(bad) > 0 {
		t.Fatalf("not ok: %s", describe(bad))
	}
}

// Against OpenCode 2.1.2 as the fake serves it (its own description),
// with servers the daemon can keep, doctor passes: a status 2.1.2 lacks is
// not a failure.
func TestRunAgainst212Passes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, oo := newFake2(t, map[string]fake2.Spec{"ok": {}, "off": {Status: "disabled"}, "broken": {Status: "failed", Error: "boom"}})
		checks := Run(context.Background(), fake2.URL, oo, Options{})
		if !Healthy(checks) {
			t.Fatalf("doctor fails OpenCode 2.1.2:\n%s", describe(checks))
		}
	})
}

// A status the daemon does not know, listed by the description, fails
// doctor as a server in such a status does (TestRunAgainstFake2Variants).
func TestRunFailsOnAStatusTheDescriptionAdds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, oo := newFake2(t, nil)
		fake.SetDoc(editV2(t, func(d map[string]any) {
			sc := schemas(d)
			sc["Mcp.Status.Paused"] = map[string]any{"type": "object", "properties": map[string]any{"status": map[string]any{"type": "string", "enum": []any{"paused"}}}}
			st := sc["Mcp.Server"].(map[string]any)["properties"].(map[string]any)["status"].(map[string]any)
			st["anyOf"] = append(st["anyOf"].([]any), map[string]any{"$ref": "#/components/schemas/Mcp.Status.Paused"})
		}))
		checks := Run(context.Background(), fake2.URL, oo, Options{})
		if Healthy(checks) || !strings.Contains(describe(checks), "FAIL mcp statuses: MCP status `paused`") {
			t.Fatalf("checks:\n%s", describe(checks))
		}
	})
}

// The event stream is checked on the wire: it must answer and send
// server.connected first, within five seconds. A stream that stays
// silent, one that begins with another event, and one that is refused
// each fail, and say so.
func TestStreamCheck(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream func(w http.ResponseWriter, r *http.Request)
		want   string
	}{
		{"silent", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(": heartbeat\n\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, "event stream sent no first event"},
		{"another first event", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`data: {"id":"evt_1","type":"project.updated","data":{}}` + "\n\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, `GET /api/event's first event is "project.updated", not server.connected`},
		{"refused", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }, "GET /api/event answered 404"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := fake2.New(nil)
				fake.Password = v2pw
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/api/event" {
						fake.ServeHTTP(w, r)
						return
					}
					c.stream(w, r)
				})
				l := fakeopencode.NewPipeListener()
				hs := &http.Server{Handler: h}
				done := make(chan struct{})
				go func() { defer close(done); _ = hs.Serve(l) }()
				tr := &http.Transport{DialContext: l.Dial}
				defer func() { tr.CloseIdleConnections(); _ = hs.Close(); <-done }()
				start := time.Now()
				checks := Run(context.Background(), fake2.URL, opencode.Options{Password: v2pw, Transport: tr}, Options{})
				if took := time.Since(start); took > streamWait+time.Second {
					t.Errorf("doctor took %v", took)
				}
				got := find(checks, "event stream")
				if len(got) != 1 || got[0].Severity != Fail || !strings.Contains(got[0].Detail, c.want) {
					t.Fatalf("event stream: %s", describe(got))
				}
				if Healthy(checks) {
					t.Fatal("doctor passes a server whose stream does not work")
				}
			})
		})
	}
}

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
