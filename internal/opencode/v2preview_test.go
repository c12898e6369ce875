package opencode_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// previewRig serves a preview-profile fake and returns a client for it.
func previewRig(t *testing.T, servers map[string]fake2.Spec) (*fake2.Server, *opencode.ClientV2) {
	t.Helper()
	fake := fake2.NewPreview(servers)
	tr, stop := fake.Serve()
	t.Cleanup(stop)
	c, err := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: fake2.DefaultPassword})
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

// The client works the preview build as it answers: version from
// /api/health, connect on the development route (never the experimental
// one), no config route (integrationID tells the remote servers, with no
// request for a config).
func TestClientV2AgainstPreview(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, c := previewRig(t, map[string]fake2.Spec{"fs": {Status: "failed"}, "web": {Type: "remote", URL: "http://127.0.0.1:9/mcp"}})
		ctx := context.Background()
		info, err := c.Info(ctx)
		if err != nil || info.Version != fake2.PreviewVersion || info.PID != fake2.PreviewPID {
			t.Fatalf("info = %+v, %v", info, err)
		}
		st, err := c.MCPStatus(ctx, "/p")
		if err != nil || st["web"].IntegrationID == "" || st["fs"].IntegrationID != "" {
			t.Fatalf("status = %+v, %v", st, err)
		}
		if err := c.Connect(ctx, "/p", "fs"); err != nil {
			t.Fatal(err)
		}
		// fake2.URL is not a loopback address: no config files are read,
		// and only integrationID says who is remote.
		cfg, err := c.MCPConfig(ctx, "/p")
		if err != nil || cfg["web"].Type != "remote" || len(cfg) != 1 {
			t.Fatalf("config = %+v, %v", cfg, err)
		}
		for _, route := range []string{fake2.RouteInfo, fake2.RouteConfig, fake2.RouteConnect, fake2.RouteUnknownAPI} {
			if n := fake.Count(route, "", ""); n != 0 {
				t.Errorf("%d requests of %s", n, route)
			}
		}
		if n := fake.Count(fake2.RouteConnectDev, "/p", "fs"); n != 1 {
			t.Errorf("dev connects = %d", n)
		}
	})
}

// Booted locations are listed without booting one; where the server has
// no such list, known is false and nothing is asked.
func TestLocationBooted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		server := func(fake *fake2.Server) *opencode.Server {
			tr, stop := fake.Serve()
			t.Cleanup(stop)
			s, err := opencode.NewServer(opencode.ServerOptions{URL: fake2.URL, Client: opencode.Options{Transport: tr, Password: fake2.DefaultPassword}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		booted := func(s *opencode.Server, dir string) (booted, known bool, err error) {
			dirs, known, err := s.BootedLocations(ctx)
			return opencode.LocationListed(dirs, dir), known, err
		}
		fake := fake2.NewPreview(map[string]fake2.Spec{"a": {}})
		s := server(fake)
		if booted, known, err := booted(s, "/p"); booted || !known || err != nil {
			t.Fatalf("before any read: %v %v %v", booted, known, err)
		}
		if len(fake.Instances()) != 0 {
			t.Fatalf("asking booted %v", fake.Instances())
		}
		_, _ = s.MCPStatus(ctx, "/p")
		if booted, known, err := booted(s, "/p/"); !booted || !known || err != nil {
			t.Fatalf("after a read: %v %v %v", booted, known, err)
		}
		fake.Shutdown("/p")
		if booted, _, _ := booted(s, "/p"); booted {
			t.Fatal("booted after a disposal")
		}

		f212 := fake2.New(nil)
		s212 := server(f212)
		if booted, known, err := booted(s212, "/p"); booted || !known || err != nil {
			t.Fatalf("2.1.2: %v %v %v", booted, known, err)
		}
		if n := f212.Count(fake2.RouteUnknownAPI, "", ""); n != 0 {
			t.Errorf("2.1.2 was asked a route its description lacks")
		}
		noList := fake2.New(nil)
		noList.SetDoc([]byte(strings.Replace(fake2.DefaultDoc, `"/api/debug/location":`, `"/api/debug/locations-gone":`, 1)))
		if booted, known, err := booted(server(noList), "/p"); booted || known || err != nil {
			t.Fatalf("a description without the list: %v %v %v", booted, known, err)
		}
		if n := noList.Count(fake2.RouteUnknownAPI, "", ""); n != 0 {
			t.Errorf("a server without the list was asked for it")
		}
	})
}

// An empty answer is read once more after a short delay (right after a
// boot it may not be final), but a directory that really has no server
// costs one read per check after that.
func TestEmptyStatusIsReadAgainOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, c := previewRig(t, nil)
		calls := 0
		fake.SetStatusOverride(func(dir string) (int, string, bool) {
			calls++
			if calls == 1 {
				return 200, `{"location":{"directory":"/p","project":{"id":"x","directory":"/p"}},"data":[]}`, false
			}
			return 200, `{"location":{"directory":"/p","project":{"id":"x","directory":"/p"}},"data":[{"name":"a","status":{"status":"pending"}}]}`, false
		})
		ctx := context.Background()
		start := time.Now()
		st, err := c.MCPStatus(ctx, "/p")
		if err != nil || st["a"].Status != "pending" || time.Since(start) != opencode.EmptyRereadDelay {
			t.Fatalf("status %v, %v after %v; want the second read's, %v later", st, err, time.Since(start), opencode.EmptyRereadDelay)
		}
		fake.SetStatusOverride(func(string) (int, string, bool) {
			return 200, `{"location":{"directory":"/q","project":{"id":"x","directory":"/q"}},"data":[]}`, false
		})
		fake.ResetRequests()
		for range 3 {
			if st, err := c.MCPStatus(ctx, "/q"); err != nil || len(st) != 0 {
				t.Fatalf("empty directory: %v %v", st, err)
			}
		}
		if n := fake.Count(fake2.RouteMCP, "/q", ""); n != 4 {
			t.Errorf("reads of an empty directory = %d, want 4 (the first re-read once)", n)
		}
	})
}

// The preview build sends session.execution.* without a location: the
// stream's parser gives them the directory their session was seen in
// (session.created, session.input.*), forgets deleted sessions, and
// remembers at most a bounded number.
func TestExecutionEventsGetTheirSessionsDirectory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.NewPreview(nil)
		tr, stop := fake.Serve()
		defer stop()
		var got []opencode.Event
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		srv, _ := opencode.NewServer(opencode.ServerOptions{URL: fake2.URL, Client: opencode.Options{Transport: tr, Password: fake2.DefaultPassword}})
		go func() {
			defer close(done)
			_ = srv.Stream(ctx, opencode.StreamOptions{}, func(ev opencode.Event) {
				if ev.Kind == opencode.KindActivity {
					got = append(got, ev)
				}
			})
		}()
		synctest.Wait()
		fake.Publish("/p", "session.execution.started", map[string]any{"sessionID": "ses_early"}) // unknown yet
		fake.Publish("/p", "session.created", map[string]any{"sessionID": "ses_1"})
		fake.Publish("/q", "session.input.admitted", map[string]any{"sessionID": "ses_2", "inputID": "msg_1"})
		fake.Publish("/p", "session.execution.started", map[string]any{"sessionID": "ses_1"})
		fake.Publish("/q", "session.execution.succeeded", map[string]any{"sessionID": "ses_2"})
		fake.Publish("/p", "session.deleted", map[string]any{"sessionID": "ses_1"})
		fake.Publish("/p", "session.execution.failed", map[string]any{"sessionID": "ses_1"})
		synctest.Wait()
		cancel()
		<-done
		var dirs []string
		for _, ev := range got {
			dirs = append(dirs, ev.Type+"@"+ev.Directory)
		}
		want := []string{"session.execution.started@", "session.created@/p", "session.input.admitted@/q",
			"session.execution.started@/p", "session.execution.succeeded@/q", "session.deleted@/p", "session.execution.failed@"}
		if !slices.Equal(dirs, want) {
			t.Errorf("events = %q\nwant %q", dirs, want)
		}
	})
}

func TestSessionMemoryIsBounded(t *testing.T) {
	p := opencode.NewSessionMemoryForTest(3)
	for i := range 5 {
		_, _ = p([]byte(fmt.Sprintf(`{"type":"session.created","location":{"directory":"/d%d"},"data":{"sessionID":"s%d"}}`, i, i)))
	}
	for i, want := range []string{"", "", "/d2", "/d3", "/d4"} {
		ev, _ := p([]byte(fmt.Sprintf(`{"type":"session.execution.started","data":{"sessionID":"s%d"}}`, i)))
		if ev.Directory != want {
			t.Errorf("s%d: %q, want %q (the oldest are forgotten)", i, ev.Directory, want)
		}
	}
}

// JSONC in both generations' shapes; a later layer replaces a server
// whole; headers and environment are never read.
func TestConfigFilesOfAnOpenCode2SharingOurFiles(t *testing.T) {
	global, dir := t.TempDir(), t.TempDir()
	t.Setenv("OPENCODE_CONFIG_DIR", global)
	extra := filepath.Join(t.TempDir(), "extra.json")
	t.Setenv("OPENCODE_CONFIG", extra)
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(global, "opencode.json"), `{"mcp":{"old":{"type":"local","command":["old"],"enabled":false},"web":{"type":"remote","url":"http://a/mcp","headers":{"Authorization":"Bearer SECRET"}}}}`)
	write(extra, `{"mcp":{"servers":{"x":{"type":"local","command":["x"]}}}}`)
	write(filepath.Join(dir, "opencode.jsonc"), `{
		// 2.x's shape, with comments
		"mcp": {"servers": {
			"web": {"type": "remote", "url": "http://127.0.0.1:7/mcp", /* no headers */},
			"fs": {"type": "local", "command": ["node", "fs.js"], "cwd": "sub", "environment": {"TOKEN": "SECRET"}, "disabled": true,},
		}},
	}`)
	write(filepath.Join(dir, ".opencode", "opencode.json"), `{"mcp":{"servers":{"x":{"type":"remote","url":"http://x/mcp"}}}}`)
	write(filepath.Join(dir, "opencode.json"), `not json at all`)
	cfg, err := opencode.ReadMCPConfig(dir, opencode.OwnConfigEnv(opencode.V2))
	if err != nil {
		t.Fatal(err)
	}
	no := false
	want := map[string]opencode.MCPEntry{
		"old": {Type: "local", Command: []string{"old"}, Enabled: &no},
		"web": {Type: "remote", URL: "http://127.0.0.1:7/mcp"},
		"fs":  {Type: "local", Command: []string{"node", "fs.js"}, Cwd: "sub", Enabled: &no},
		"x":   {Type: "remote", URL: "http://x/mcp"},
	}
	if got := slices.Sorted(maps.Keys(cfg)); !slices.Equal(got, []string{"fs", "old", "web", "x"}) {
		t.Fatalf("servers %v", got)
	}
	for n, w := range want {
		g := cfg[n]
		if g.Type != w.Type || g.URL != w.URL || g.Cwd != w.Cwd || !slices.Equal(g.Command, w.Command) || (g.Enabled == nil) != (w.Enabled == nil) || g.Enabled != nil && *g.Enabled != *w.Enabled {
			t.Errorf("%s = %+v, want %+v", n, g, w)
		}
		if s := fmt.Sprintf("%+v", g); strings.Contains(s, "SECRET") {
			t.Errorf("%s holds a secret: %s", n, s)
		}
	}
}

func FuzzParseConfigFile(f *testing.F) {
	f.Add([]byte(`{"mcp":{"servers":{"a":{"type":"remote","url":"http://x",},},},}`))
	f.Add([]byte(`{"mcp":{"a":{"type":"local","command":["x"],"enabled":false}}}`))
	f.Add([]byte("// c\n{/* x */\"mcp\":{\"servers\":{\"type\":\"local\"}}}"))
	f.Add([]byte(`{"mcp":{"servers":7,"b":[],"c":{"type":1,"command":"x","cwd":2}}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"a":"/* not a comment */ // nor this"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := opencode.ParseConfigFile(b)
		if (err == nil) == (cfg == nil) {
			t.Fatalf("cfg %v with err %v", cfg, err)
		}
	})
}

// The session memory is bounded in bytes too: an id or a directory far
// longer than OpenCode's is not remembered.
func TestSessionMemoryIgnoresHugeIDs(t *testing.T) {
	p := opencode.NewSessionMemoryForTest(3)
	huge := strings.Repeat("x", 1<<20)
	_, _ = p([]byte(`{"type":"session.created","location":{"directory":"/d"},"data":{"sessionID":"` + huge + `"}}`))
	_, _ = p([]byte(`{"type":"session.created","location":{"directory":"/` + huge + `"},"data":{"sessionID":"s"}}`))
	for _, id := range []string{huge, "s"} {
		if ev, _ := p([]byte(`{"type":"session.execution.started","data":{"sessionID":"` + id + `"}}`)); ev.Directory != "" {
			t.Errorf("a session of a %d-byte id (or directory) was remembered", len(id))
		}
	}
}
