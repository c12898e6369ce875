package opencode_test

import (
	"context"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A GET /api/mcp answer in the shape docs/opencode.md#mcp-status-and-pending-2x describes.
const factsStatusV2 = `{"location":{"directory":"/Users/me/p","project":{"id":"prj_1","directory":"/Users/me/p"}},
  "data":[{"name":"docs","status":{"status":"connected"}},
          {"name":"gh","status":{"status":"failed","error":"Connection closed"}},
          {"name":"lin","status":{"status":"needs_auth"},"integrationID":"mcp_3f2a9c0d1e2b4a5f"}]}`

// A GET /api/config answer in the shape docs/opencode.md#config-layers-2x describes.
const factsConfigV2 = `[{"type":"directory","path":"/Users/me/.config/opencode"},
  {"type":"document","path":"/Users/me/p/opencode.jsonc","info":{"mcp":{"servers":{
     "docs":{"type":"remote","url":"https://x/mcp","headers":{"Authorization":"Bearer hdr-secret"}},
     "fs":{"type":"local","command":["node","fs.js"],"disabled":true}}}}}]`

func TestParseStatusV2(t *testing.T) {
	loc, st, err := opencode.ParseStatusV2([]byte(factsStatusV2))
	if err != nil || loc != "/Users/me/p" {
		t.Fatalf("facts example: location %q, err %v", loc, err)
	}
	want := map[string]opencode.MCPServerStatus{"docs": {Status: "connected"}, "gh": {Status: "failed", Error: "Connection closed"}, "lin": {Status: "needs_auth", IntegrationID: "mcp_3f2a9c0d1e2b4a5f"}}
	if len(st) != len(want) {
		t.Fatalf("servers = %v, want %v", st, want)
	}
	for n, w := range want {
		if st[n] != w {
			t.Errorf("%s = %+v, want %+v", n, st[n], w)
		}
	}
	// pending, a status this package does not know, an error that is not a
	// string, and an empty list (a location without servers).
	_, st, err = opencode.ParseStatusV2([]byte(`{"data":[{"name":"a","status":{"status":"pending"}},{"name":"b","status":{"status":"disconnected"}},{"name":"c","status":{"status":"failed","error":{"x":1}}}]}`))
	if err != nil || st["a"].Status != opencode.StatusPending || st["b"].Status != "disconnected" || st["c"].Error != `{"x":1}` {
		t.Fatalf("odd statuses = %+v, %v", st, err)
	}
	// A server whose endpoint answered 429, and one still inside the
	// cooldown OpenCode 2 keeps after it (core/src/mcp/client.ts and
	// cooldown.ts): rate limited. Another failure, or a 429 named by a
	// status that is not failed, is not.
	_, st, err = opencode.ParseStatusV2([]byte(`{"data":[
		{"name":"first","status":{"status":"failed","error":"Error POSTing to endpoint: Too Many Requests (HTTP 429)"}},
		{"name":"cool","status":{"status":"failed","error":"Error POSTing to endpoint: MCP endpoint cooldown after HTTP 429"}},
		{"name":"down","status":{"status":"failed","error":"Error POSTing to endpoint: Bad Gateway (HTTP 502)"}},
		{"name":"reg","status":{"status":"needs_client_registration","error":"HTTP 429"}}]}`))
	if err != nil || !st["first"].RateLimited || !st["cool"].RateLimited || st["down"].RateLimited || st["reg"].RateLimited {
		t.Fatalf("rate limited = %+v, %v; want first and cool only", st, err)
	}
	if _, st, err := opencode.ParseStatusV2([]byte(`{"location":{"directory":"/p"},"data":[]}`)); err != nil || st == nil || len(st) != 0 {
		t.Fatalf("empty list = %v, %v; want an empty, non-nil map", st, err)
	}
	for _, bad := range []string{``, `null`, `[]`, `{}`, `{"data":null}`, `{"data":{}}`,
		`{"a":{"status":"connected"}}`, // the 1.x map
		`{"data":[null]}`, `{"data":[{"status":{"status":"connected"}}]}`, `{"data":[{"name":"a"}]}`,
		`{"data":[{"name":"a","status":{"status":1}}]}`, `{"data":[{"name":"a","status":"connected"}]}`,
		`{"location":{"directory":1},"data":[]}`, `<html>`} {
		if _, st, err := opencode.ParseStatusV2([]byte(bad)); err == nil || st != nil {
			t.Errorf("ParseStatusV2(%q) = %v, %v; want an error", bad, st, err)
		}
	}
}

func TestParseConfigV2(t *testing.T) {
	cfg, err := opencode.ParseConfigV2([]byte(factsConfigV2))
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg["docs"]; e.Type != "remote" || e.URL != "https://x/mcp" || e.Enabled != nil {
		t.Errorf("docs = %+v", e)
	}
	if e := cfg["fs"]; e.Type != "local" || e.Enabled == nil || *e.Enabled {
		t.Errorf("fs = %+v, want disabled", e)
	}
	// Later layers win, whole: the second "docs" has no url and is not
	// disabled any more; "directory" layers and layers without mcp are
	// not settings; odd fields cost only themselves.
	cfg, err = opencode.ParseConfigV2([]byte(`[
	  {"type":"document","path":"/a","info":{"mcp":{"servers":{"docs":{"type":"remote","url":"https://old","disabled":true},"keep":{"type":"local"}}}}},
	  {"type":"directory","path":"/b","info":{"mcp":{"servers":{"docs":{"type":"remote","url":"https://dir-layer"}}}}},
	  {"type":"document","info":{"mcp":{"servers":{"docs":{"type":"local","disabled":false}}}}},
	  {"type":"document","info":{"model":"x"}},
	  {"type":"document","info":{"mcp":{"servers":{"odd":{"type":3,"url":"https://u","disabled":"yes"}}}}},
	  {"type":"document","info":{"mcp":{"servers":{"nope":7}}}},
	  "garbage", 12
	]`))
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg["docs"]; e.Type != "local" || e.URL != "" || e.Enabled == nil || !*e.Enabled {
		t.Errorf("docs = %+v, want the later layer's whole entry", e)
	}
	if e := cfg["keep"]; e.Type != "local" {
		t.Errorf("keep = %+v", e)
	}
	if e := cfg["odd"]; e.Type != "" || e.URL != "https://u" || e.Enabled != nil {
		t.Errorf("odd = %+v", e)
	}
	if _, ok := cfg["nope"]; !ok || len(cfg) != 4 {
		t.Errorf("config = %+v", cfg)
	}
	for _, bad := range []string{``, `null`, `{}`, `{"mcp":{}}`, `"x"`} {
		if cfg, err := opencode.ParseConfigV2([]byte(bad)); err == nil || cfg != nil {
			t.Errorf("ParseConfigV2(%q) = %v, %v; want an error", bad, cfg, err)
		}
	}
}

func TestParseInfo(t *testing.T) {
	info, err := opencode.ParseInfo([]byte(`{"version":"2.0.21","pid":43067,"urls":["http://127.0.0.1:49374"],"paths":{"tmp":"/tmp/opencode","home":"/Users/me"}}`))
	if err != nil || info.Version != "2.0.21" || info.PID != 43067 {
		t.Fatalf("facts example = %+v, %v", info, err)
	}
	for _, bad := range []string{`{}`, `{"version":"2.0.21"}`, `{"version":2,"pid":1}`, `{"version":"2.0.21","pid":"1"}`,
		`{"version":"2.0.21","pid":1.5}`, `{"version":"","pid":1}`, `{"version":"2.0.21","pid":-1}`, `<html>`, `[]`} {
		if _, err := opencode.ParseInfo([]byte(bad)); err == nil {
			t.Errorf("ParseInfo(%q) = nil error", bad)
		}
	}
}

// v2Rig serves a 2.x fake and returns a 2.x client for it.
func v2Rig(t *testing.T, servers map[string]fake2.Spec) (*fake2.Server, *opencode.ClientV2) {
	t.Helper()
	fake := fake2.New(servers)
	tr, stop := fake.Serve()
	t.Cleanup(stop)
	c, err := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: fake2.DefaultPassword})
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

func TestClientV2AgainstFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, c := v2Rig(t, map[string]fake2.Spec{
			"ok":   {},
			"bad":  {Status: "failed", Error: "Connection refused", AfterConnect: "connected", ConnectDelay: 5 * time.Second},
			"off":  {Status: "disabled"},
			"docs": {Type: "remote", URL: "https://x/mcp", Headers: map[string]string{"Authorization": "Bearer hdr-secret"}},
		})
		fake.SetPending(3 * time.Second)
		ctx := context.Background()

		// Reading boots the location: every enabled server is pending
		// until its first attempt is over.
		st, err := c.MCPStatus(ctx, "/p")
		if err != nil {
			t.Fatal(err)
		}
		if st["ok"].Status != opencode.StatusPending || st["bad"].Status != opencode.StatusPending || st["off"].Status != opencode.StatusDisabled {
			t.Fatalf("right after boot: %+v, want pending (disabled stays disabled)", st)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait() // the outcomes settle at that very instant
		st, _ = c.MCPStatus(ctx, "/p")
		if st["ok"].Status != "connected" || st["bad"] != (opencode.MCPServerStatus{Status: "failed", Error: "Connection refused"}) {
			t.Fatalf("after the pending time: %+v", st)
		}

		// A connect answers 204 when its attempt is over.
		start := time.Now()
		if err := c.Connect(ctx, "/p", "bad"); err != nil {
			t.Fatalf("connect: %v", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("connect returned after %v, want when the attempt was over (5s)", d)
		}
		if st, _ := c.MCPStatus(ctx, "/p"); st["bad"].Status != "connected" {
			t.Errorf("after connect: %+v", st["bad"])
		}
		if err := c.Connect(ctx, "/p", "ghost"); !errors.Is(err, opencode.ErrNotFound) {
			t.Errorf("unknown server: err = %v, want ErrNotFound", err)
		}

		cfg, err := c.MCPConfig(ctx, "/p")
		if err != nil {
			t.Fatal(err)
		}
		if cfg["docs"].Type != "remote" || cfg["docs"].URL != "https://x/mcp" || cfg["off"].Enabled == nil || *cfg["off"].Enabled || cfg["ok"].Type != "local" {
			t.Errorf("config = %+v", cfg)
		}

		info, err := c.Info(ctx)
		if err != nil || info.Version != fake2.DefaultVersion || info.PID != fake2.DefaultPID {
			t.Errorf("info = %+v, %v", info, err)
		}
		doc, err := c.Doc(ctx)
		if err != nil || !strings.Contains(string(doc), `"/api/experimental/mcp/{server}/connect":`) {
			t.Errorf("doc = %.80s…, %v", doc, err)
		}

		// Never the 1.x parameter, never the server's own location.
		for _, r := range fake.Requests() {
			if r.LegacyDirectory != "" || r.Directory == fake2.DefaultHome {
				t.Errorf("request %+v: sent ?directory= or no location", r)
			}
		}
		if n := fake.Count(fake2.RouteUnauthorized, "", ""); n != 0 {
			t.Errorf("%d requests refused", n)
		}
	})
}

func TestClientV2WrongPassword(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.New(map[string]fake2.Spec{"a": {}})
		tr, stop := fake.Serve()
		defer stop()
		for _, pw := range []string{"", "wrong"} {
			c, _ := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: pw})
			if _, err := c.MCPStatus(context.Background(), "/p"); !errors.Is(err, opencode.ErrUnauthorized) {
				t.Errorf("password %q: err = %v, want ErrUnauthorized", pw, err)
			}
			if err := c.Connect(context.Background(), "/p", "a"); !errors.Is(err, opencode.ErrUnauthorized) {
				t.Errorf("password %q: connect err = %v, want ErrUnauthorized", pw, err)
			}
		}
		if len(fake.Instances()) != 0 {
			t.Errorf("refused requests booted %v", fake.Instances())
		}
	})
}

// A directory or server name with odd characters reaches the server
// exactly as sent: location[directory] and the path segment are escaped,
// and neither is taken apart at a slash, '&', '#', '?', '%' or '+'.
func TestClientV2RoundTripsOddNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"plain", "my srv", "a/b", "ü-ñ", "50%", "x[0]", "a&b=c", "h#1", "q?x", "p+q", "...", ".x", "%2F", "%2e%2e"}
		servers := map[string]fake2.Spec{}
		for _, n := range names {
			servers[n] = fake2.Spec{}
		}
		fake, c := v2Rig(t, servers)
		dirs := []string{"/tmp/a b/ü", "/tmp/50%/x", "/tmp/[x]/location[directory]=y", "/tmp/a&directory=/evil", "/tmp/h#frag", "/tmp/q?x=1", "/tmp/p+q", "/tmp/日本/"}
		ctx := context.Background()
		for _, d := range dirs {
			fake.Boot(d) // its servers listed at the first read
			fake.ResetRequests()
			st, err := c.MCPStatus(ctx, d)
			if err != nil || len(st) != len(names) {
				t.Fatalf("%q: status %v, %v", d, st, err)
			}
			if _, err := c.MCPConfig(ctx, d); err != nil {
				t.Fatalf("%q: config %v", d, err)
			}
			for _, n := range names {
				if err := c.Connect(ctx, d, n); err != nil {
					t.Fatalf("%q %q: connect %v", d, n, err)
				}
			}
			reqs := fake.Requests()
			if len(reqs) != 2+len(names) {
				t.Fatalf("%q: %d requests: %+v", d, len(reqs), reqs)
			}
			for i, r := range reqs {
				if r.Directory != d || r.ViaHeader || r.LegacyDirectory != "" {
					t.Errorf("request %+v: location %q, want %q", r, r.Directory, d)
				}
				if i >= 2 && (r.Route != fake2.RouteConnect || r.Name != names[i-2]) {
					t.Errorf("request %+v: want connect of %q", r, names[i-2])
				}
			}
		}
	})
}

// "." and ".." cannot be a path segment: every URL parser resolves them.
// Connect refuses them instead of reaching another route.
func TestClientV2ConnectRefusesDotNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, c := v2Rig(t, map[string]fake2.Spec{"..": {}, ".": {}})
		for _, n := range []string{".", ".."} {
			if err := c.Connect(context.Background(), "/p", n); !errors.Is(err, opencode.ErrUnavailable) || !strings.Contains(err.Error(), "cannot be sent") {
				t.Errorf("%q: err = %v", n, err)
			}
		}
		if n := len(fake.Requests()); n != 0 {
			t.Errorf("%d requests sent", n)
		}
	})
}

// v2Handler answers every request with code and body, recording paths.
func v2Handler(t *testing.T, answer func(r *http.Request) (int, string)) *opencode.ClientV2 {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, body := answer(r)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := opencode.NewV2(srv.URL, opencode.Options{Password: "s3cret-pw", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientV2SortsErrors(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var paths []string
	code, body := 405, ""
	c := v2Handler(t, func(r *http.Request) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		return code, body
	})
	set := func(c int, b string) { mu.Lock(); code, body, paths = c, b, nil; mu.Unlock() }

	// The connect route does not exist: say so, as unavailable, not as
	// "no such server" (which would make the engine forget the server),
	// and do not ask again within the backoff step.
	for i, cb := range []struct {
		code int
		body string
	}{{405, ""}, {404, ""}, {404, "Not Found"}} {
		set(cb.code, cb.body)
		err := c.Connect(ctx, "/p", "a")
		if !errors.Is(err, opencode.ErrUnavailable) || !strings.Contains(err.Error(), "/api/experimental/mcp/{name}/connect") || !strings.Contains(err.Error(), "no MCP server can be reconnected") {
			t.Errorf("%d %q: err = %v, want unavailable naming the route and the gap", cb.code, cb.body, err)
		}
		mu.Lock()
		want := []string{"POST /api/experimental/mcp/a/connect"}
		if i > 0 {
			want = nil
		}
		if !slices.Equal(paths, want) {
			t.Errorf("tried %q, want %q", paths, want)
		}
		mu.Unlock()
	}
	// A new detection (a new client) asks again.
	c = v2Handler(t, func(r *http.Request) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		return code, body
	})
	// A missing location is not a missing server.
	set(404, `{"_tag":"LocationNotFoundError","location":{"directory":"/p"},"message":"Location not found: /p"}`)
	if err := c.Connect(ctx, "/p", "a"); errors.Is(err, opencode.ErrNotFound) || !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("location not found on connect: err = %v, want ErrUnavailable", err)
	}
	set(404, `{"_tag":"McpServerNotFoundError","server":"a","message":"MCP server not found: a"}`)
	if err := c.Connect(ctx, "/p", "a"); !errors.Is(err, opencode.ErrNotFound) {
		t.Errorf("server not found: err = %v", err)
	}
	set(204, "")
	if err := c.Connect(ctx, "/p", "a"); err != nil {
		t.Errorf("204: err = %v", err)
	}
	// 2.x's 403 is about the directory, not the password.
	set(403, `{"_tag":"LocationPermissionDeniedError","location":{"directory":"/p"},"message":"Location access denied: /p"}`)
	if _, err := c.MCPStatus(ctx, "/p"); errors.Is(err, opencode.ErrUnauthorized) || !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("403 location denied: err = %v, want unavailable", err)
	}
	set(401, `{"_tag":"UnauthorizedError","message":"Unauthorized"}`)
	_, err := c.MCPStatus(ctx, "/p")
	if !errors.Is(err, opencode.ErrUnauthorized) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("401: err = %v", err)
	}
	// 200s that are not the expected JSON never read as "no servers".
	for _, b := range []string{"<!doctype html>", `{"a":{"status":"connected"}}`, "[]", "null"} {
		set(200, b)
		if st, err := c.MCPStatus(ctx, "/p"); !errors.Is(err, opencode.ErrUnavailable) || st != nil {
			t.Errorf("200 %q: %v, %v", b, st, err)
		}
	}
	set(200, `{"mcp":{"a":{"type":"local"}}}`) // the 1.x config
	if _, err := c.MCPConfig(ctx, "/p"); !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("1.x config: err = %v", err)
	}
	set(200, `<!doctype html>`)
	if _, err := c.Info(ctx); !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("html info: err = %v", err)
	}
}

// A server that ignores location[directory] answers for its own working
// directory ($HOME): those servers must not be taken for the project's.
func TestClientV2RejectsAnswerForAnotherLocation(t *testing.T) {
	c := v2Handler(t, func(r *http.Request) (int, string) {
		return 200, `{"location":{"directory":"/Users/me"},"data":[{"name":"home-only","status":{"status":"failed"}}]}`
	})
	_, err := c.MCPStatus(context.Background(), "/Users/me/p")
	if !errors.Is(err, opencode.ErrUnavailable) || !strings.Contains(err.Error(), "ignored location[directory]") {
		t.Fatalf("err = %v, want a loud mismatch", err)
	}
	// A trailing slash is the same location.
	c = v2Handler(t, func(r *http.Request) (int, string) {
		return 200, `{"location":{"directory":"/Users/me/p"},"data":[]}`
	})
	if _, err := c.MCPStatus(context.Background(), "/Users/me/p/"); err != nil {
		t.Fatalf("trailing slash: %v", err)
	}
}

// Connects and reads use the 1.x client's timeouts.
func TestClientV2HungConnectTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fakeopencode.NewPipeListener()
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })}
		done := make(chan struct{})
		go func() { defer close(done); _ = hs.Serve(l) }()
		tr := &http.Transport{DialContext: l.Dial}
		c, _ := opencode.NewV2(fakeopencode.URL, opencode.Options{Transport: tr})
		start := time.Now()
		err := c.Connect(context.Background(), "/p", "a")
		if !errors.Is(err, opencode.ErrUnavailable) || time.Since(start) != opencode.DefaultConnectTimeout {
			t.Errorf("err = %v after %v, want a timeout after %v", err, time.Since(start), opencode.DefaultConnectTimeout)
		}
		start = time.Now()
		if _, err := c.MCPStatus(context.Background(), "/p"); !errors.Is(err, opencode.ErrUnavailable) || time.Since(start) != opencode.DefaultTimeout {
			t.Errorf("status err = %v after %v", err, time.Since(start))
		}
		tr.CloseIdleConnections()
		_ = hs.Close()
		<-done
	})
}

func FuzzParseStatusV2(f *testing.F) {
	f.Add([]byte(factsStatusV2))
	f.Add([]byte(`{"data":[{"name":"a","status":{"status":"pending"}}]}`))
	f.Add([]byte(`{"data":[{"name":"a","status":{"status":"failed","error":{"x":1}}}]}`))
	f.Add([]byte(`{"location":{"directory":1},"data":[]}`))
	f.Add([]byte(`{"a":{"status":"connected"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, st, err := opencode.ParseStatusV2(b)
		if err != nil && st != nil {
			t.Fatal("error with a non-nil map")
		}
		if err == nil && st == nil {
			t.Fatal("nil map without error: garbage must never read as no servers")
		}
	})
}

func FuzzParseConfigV2(f *testing.F) {
	f.Add([]byte(factsConfigV2))
	f.Add([]byte(`[{"type":"document","info":{"mcp":{"servers":{"a":{"type":3,"disabled":"x"},"b":7}}}},"x",1,null]`))
	f.Add([]byte(`{"mcp":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := opencode.ParseConfigV2(b)
		if (err == nil) == (cfg == nil) {
			t.Fatalf("cfg %v with err %v", cfg, err)
		}
	})
}

// Rule 8 says that from the moment OpenCode refuses connections
// every directory is forgotten; the engine learns it from ErrRefused on a
// status read or connect (engine.unreadable, finishConnect). The 2.x
// client's send never marks a refused dial, so on OpenCode 2.x a service
// that went away is only "unavailable": the engine keeps every directory
// and its next idle read re-boots each location in the restarted service,
// spawning MCP fleets nobody uses.
func TestV2CallsReportRefused(t *testing.T) {
	closed := closedAddr(t)
	ctx := context.Background()
	c, err := opencode.NewV2("http://"+closed, opencode.Options{Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	_, errStatus := c.MCPStatus(ctx, "/d")
	_, errConfig := c.MCPConfig(ctx, "/d")
	_, errInfo := c.Info(ctx)
	for call, err := range map[string]error{
		"status": errStatus, "config": errConfig, "info": errInfo,
		"connect": c.Connect(ctx, "/d", "s"),
	} {
		if !errors.Is(err, opencode.ErrUnavailable) {
			t.Errorf("2.x %s: err = %v, want ErrUnavailable", call, err)
		}
		if !errors.Is(err, opencode.ErrRefused) {
			t.Errorf("2.x %s: errors.Is(ErrRefused) = false for a refused dial (%v)", call, err)
		}
	}
}

// The same through opencode.Server, which is what the daemon's engine
// calls: a 2.x server detected, then gone (its port closed).
func TestServerV2StatusAfterServiceGoneIsRefused(t *testing.T) {
	fake := fake2.New(map[string]fake2.Spec{"a": {}})
	srv := httptest.NewServer(fake)
	s, err := opencode.NewServer(opencode.ServerOptions{URL: srv.URL, Client: opencode.Options{Password: fake2.DefaultPassword}})
	if err != nil {
		t.Fatal(err)
	}
	if gen, _, err := s.Detect(context.Background()); err != nil || gen != opencode.V2 {
		t.Fatalf("detect: %v %v", gen, err)
	}
	srv.Close()
	_, err = s.MCPStatus(context.Background(), "/d")
	if !errors.Is(err, opencode.ErrRefused) {
		t.Errorf("2.x status read after the service went away: errors.Is(ErrRefused) = false (%v); the engine keeps every directory armed", err)
	}
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
		fake := fake2.New(map[string]fake2.Spec{"a": {}})
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

		// A server without the list (404, no OpenCode tag): not known,
		// and not asked again within its backoff step.
		asked := 0
		tr, stop := fakeopencode.ServeHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked++
			w.WriteHeader(http.StatusNotFound)
		}))
		t.Cleanup(stop)
		noList, err := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: fake2.DefaultPassword})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if dirs, known, err := noList.BootedLocations(ctx); dirs != nil || known || err != nil {
				t.Fatalf("a server without the list: %v %v %v", dirs, known, err)
			}
		}
		if asked != 1 {
			t.Errorf("a server without the list was asked %d times, want once", asked)
		}
	})
}

// An empty answer is read once more after a short delay (right after a
// boot it may not be final), but a directory that really has no server
// costs one read per check after that.
func TestEmptyStatusIsReadAgainOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.New(nil)
		tr, stop := fake.Serve()
		t.Cleanup(stop)
		c, err := opencode.NewV2(fake2.URL, opencode.Options{Transport: tr, Password: fake2.DefaultPassword})
		if err != nil {
			t.Fatal(err)
		}
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
