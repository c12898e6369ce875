package statusapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/metrics"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"go.uber.org/goleak"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSource is a watched server whose state the test sets: snap, and
// gen, alive, svc and file as its Generation, Alive, Service and
// ServiceFile answer.
// snapshots counts what Summary and Directories were asked.
type fakeSource struct {
	mu        sync.Mutex
	calls     []ReconnectRequest
	armed     []string // "dir reason"
	snap      reconnect.Snapshot
	gen       string
	alive     error
	svc       *Service
	file      string // the service file it follows
	snapshots atomic.Int32
}

func (f *fakeSource) Arm(dir, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if dir == "relative" {
		return errors.New(`directory "relative" is not an absolute path`)
	}
	f.armed = append(f.armed, dir+" "+reason)
	return nil
}

func (f *fakeSource) Summary() reconnect.Snapshot {
	f.snapshots.Add(1)
	s := f.snap
	s.Directories = nil
	return s
}

func (f *fakeSource) Directories() iter.Seq[reconnect.DirSnapshot] {
	f.snapshots.Add(1)
	return slices.Values(f.snap.Directories)
}

func (f *fakeSource) Alive(time.Duration) error     { return f.alive }
func (f *fakeSource) CurrentURL() string            { return f.snap.URL }
func (f *fakeSource) Stream() reconnect.StreamState { return f.snap.Stream }
func (f *fakeSource) Generation() string            { return f.gen }
func (f *fakeSource) ServiceFile() string           { return f.file }
func (f *fakeSource) Service() *Service             { return f.svc }

func (f *fakeSource) Reconnect(dir string, names []string) (reconnect.ReconnectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if dir == "relative" {
		return reconnect.ReconnectResult{}, errors.New(`directory "relative" is not an absolute path`)
	}
	f.calls = append(f.calls, ReconnectRequest{Directory: dir, Servers: names})
	return reconnect.ReconnectResult{URL: f.snap.URL, Directories: []string{dir}}, nil
}

func newAPI(t *testing.T) (*fakeSource, *API, *httptest.Server) {
	t.Helper()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	src := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4096", Stream: reconnect.StreamState{Connected: true, Since: now},
		Directories: []reconnect.DirSnapshot{{Directory: "/p/my project", ArmedBy: "mcp.tools.changed", ArmedAt: now, Servers: []reconnect.ServerSnapshot{
			{Name: "github", Status: "failed", Error: "Connection closed", Attempts: 3, Tier: "fast", NextAttempt: now.Add(4 * time.Second)},
			{Name: "sentry", Status: "needs_auth", Hint: "run: opencode mcp auth sentry"},
		}}}}}
	s := &API{Sources: []Source{src}, Broker: NewBroker(), Metrics: metrics.NewSet(), Version: "test", Token: testToken}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Broker.Close()
		hs.Close()
	})
	return src, s, hs
}

const testToken = "the-right-token-0123456789abcdef"

func TestStatusAndTable(t *testing.T) {
	_, _, hs := newAPI(t)
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://")}
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 1 || st.Servers[0].Directories[0].Servers[0].Attempts != 3 {
		t.Fatalf("status = %+v", st)
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, st, time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"/p/my project", "github", "failed", "in 3s", "Connection closed", "opencode mcp auth sentry", "events: connected"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestReconnect(t *testing.T) {
	src, _, hs := newAPI(t)
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: testToken}
	res, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "/p/x y", Servers: []string{"a/b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Directories[0] != "/p/x y" {
		t.Fatalf("result = %+v", res)
	}
	if len(src.calls) != 1 || src.calls[0].Servers[0] != "a/b" {
		t.Fatalf("calls = %+v", src.calls)
	}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "relative"}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative directory: err = %v", err)
	}
}

// A reconnect with keep makes its directory the daemon's own (armed as
// --directory, kept through OpenCode's restarts); one without does not.
func TestReconnectKeepArmsTheDirectoryAsTheUsersOwn(t *testing.T) {
	src, _, hs := newAPI(t)
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: testToken}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "/p/plain"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "/p/my projéct", Keep: true}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/p/my projéct " + reconnect.ArmedByFlag}; !slices.Equal(src.armed, want) {
		t.Fatalf("armed = %q, want %q", src.armed, want)
	}
	if len(src.calls) != 2 {
		t.Fatalf("reconnects = %+v, want both", src.calls)
	}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Keep: true}); err == nil || !strings.Contains(err.Error(), "keep needs a directory") {
		t.Fatalf("keep without a directory: err = %v", err)
	}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{Directory: "relative", Keep: true}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("keep of a relative directory: err = %v", err)
	}
	if len(src.armed) != 1 || len(src.calls) != 2 {
		t.Fatalf("refused requests reached the engine: armed %q, calls %+v", src.armed, src.calls)
	}
}

// A web page must not be able to drive POST /reconnect or read status.
func TestCrossOriginRefused(t *testing.T) {
	src, _, hs := newAPI(t)
	post := func(hdr map[string]string, ctype string) int {
		req, _ := http.NewRequest("POST", hs.URL+"/reconnect", strings.NewReader(`{}`))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(map[string]string{"Origin": "https://evil.example"}, "application/json"); code != http.StatusForbidden {
		t.Errorf("cross-origin POST = %d, want 403", code)
	}
	if code := post(map[string]string{"Sec-Fetch-Site": "cross-site"}, "application/json"); code != http.StatusForbidden {
		t.Errorf("Sec-Fetch-Site cross-site POST = %d, want 403", code)
	}
	if code := post(map[string]string{"Authorization": "Bearer " + testToken}, "text/plain"); code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain POST (a CORS simple request) = %d, want 415", code)
	}
	if len(src.calls) != 0 {
		t.Fatalf("refused requests reached the engine: %+v", src.calls)
	}
	if code := post(map[string]string{"Authorization": "Bearer " + testToken}, "application/json"); code != http.StatusOK {
		t.Errorf("same-machine POST = %d, want 200", code)
	}
}

func TestMetrics(t *testing.T) {
	_, s, hs := newAPI(t)
	m := s.Metrics.For("")
	for range 3 {
		m.Attempts.Inc()
	}
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	for _, want := range []string{`mcp_reconnect_connect_attempts_total{url=""} 3`, "mcp_reconnect_armed_directories", "mcp_reconnect_event_stream_reconnects_total", "mcp_reconnect_status_read_failures_total", "mcp_reconnect_connects_in_flight"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestEventsStream(t *testing.T) {
	_, s, hs := newAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	_, _ = r.ReadString('\n') // the opening comment
	_, _ = r.ReadString('\n')
	s.Broker.Publish(reconnect.Event{Type: reconnect.EventReconnected, Directory: "/p", Server: "s"})
	name, _ := r.ReadString('\n')
	data, _ := r.ReadString('\n')
	if name != "event: reconnected\n" {
		t.Fatalf("event line = %q", name)
	}
	var ev reconnect.Event
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(data), "data: ")), &ev); err != nil || ev.Server != "s" {
		t.Fatalf("data = %q (%v)", data, err)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:4097", "[::1]:4097", "localhost:0", "127.0.0.2:1"} {
		if err := CheckAddr(ok, false); err != nil {
			t.Errorf("CheckAddr(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:4097", ":4097", "192.0.2.1:4097", "example.com:1", "nonsense"} {
		if err := CheckAddr(bad, false); err == nil {
			t.Errorf("CheckAddr(%q) = nil, want refusal", bad)
		}
	}
	if err := CheckAddr("0.0.0.0:4097", true); err != nil {
		t.Errorf("explicitly public: %v", err)
	}
}

func TestClientNamesTheFixWhenNoDaemon(t *testing.T) {
	c := &Client{Addr: "127.0.0.1:1"}
	_, err := c.Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), "mcp-reconnect watch") {
		t.Fatalf("err = %v", err)
	}
}

// The runtime's profiles show every string the daemon holds (directories,
// server names, commands): without this daemon's token, or with another
// one, they are refused like a mutation; with it, a heap profile comes.
func TestProfilesNeedTheToken(t *testing.T) {
	_, _, hs := newAPI(t)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=2", "/debug/pprof/profile?seconds=1"} {
		for name, auth := range map[string]string{"none": "", "wrong": "Bearer nope", "basic": "Basic " + testToken} {
			hdr := map[string]string{}
			if auth != "" {
				hdr["Authorization"] = auth
			}
			code, body := request(t, hs, "GET", path, "", hdr)
			if code != http.StatusUnauthorized || strings.Contains(body, testToken) {
				t.Errorf("%s %s: %d %q, want 401 without the token", name, path, code, body)
			}
		}
	}
	code, body := request(t, hs, "GET", "/debug/pprof/heap?debug=1", "", map[string]string{"Authorization": "Bearer " + testToken})
	if code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Fatalf("with the token: %d %.200q", code, body)
	}
}

// A daemon that watches several OpenCode servers refuses a reconnect of a
// directory that names none of them: arming the directory in every server
// would start its MCP servers (and run the commands its config names) in
// each. Naming one arms it there only; a reconnect of every armed
// directory needs no name.
func TestReconnectOfADirectoryNamesOneOfSeveralServers(t *testing.T) {
	a := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4101"}}
	b := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4102"}}
	s := &API{Sources: []Source{a, b}, Broker: NewBroker(), Metrics: metrics.NewSet(), Token: testToken}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Broker.Close()
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: testToken}
	ctx := context.Background()

	_, err := c.Reconnect(ctx, ReconnectRequest{Directory: "/p"})
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "several") ||
		!strings.Contains(err.Error(), "http://127.0.0.1:4101") || !strings.Contains(err.Error(), "http://127.0.0.1:4102") {
		t.Fatalf("a directory without url, two servers watched: err = %v, want 400 naming both", err)
	}
	if len(a.calls)+len(b.calls) != 0 {
		t.Fatalf("the refused reconnect armed the directory: %+v %+v", a.calls, b.calls)
	}

	res, err := c.Reconnect(ctx, ReconnectRequest{Directory: "/p", URL: "http://127.0.0.1:4102/"})
	if err != nil || len(res.Results) != 1 || res.Results[0].URL != "http://127.0.0.1:4102" {
		t.Fatalf("with url: %+v, %v", res, err)
	}
	if len(a.calls) != 0 || len(b.calls) != 1 || b.calls[0].Directory != "/p" {
		t.Fatalf("with url: calls %+v %+v, want the named server's only", a.calls, b.calls)
	}

	if _, err := c.Reconnect(ctx, ReconnectRequest{}); err != nil {
		t.Fatalf("every armed directory of every server: %v", err)
	}
	if len(a.calls) != 1 || len(b.calls) != 2 || a.calls[0].Directory != "" {
		t.Fatalf("without a directory: calls %+v %+v, want one each", a.calls, b.calls)
	}
}

// run hands its --directory to the daemon that follows the OpenCode 2
// service before its command starts the service, whose URL it cannot
// know yet: the request names the server by the service file it follows
// (as the daemon's registry entry spells it), and keeps the directory
// there only. A file the daemon follows in no server is 404, armed
// nowhere.
func TestReconnectNamesTheServerByTheServiceFileItFollows(t *testing.T) {
	a := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:4101"}}
	b := &fakeSource{snap: reconnect.Snapshot{URL: "http://127.0.0.1:49374"}, file: "/state/opencode/service.json"}
	s := &API{Sources: []Source{a, b}, Broker: NewBroker(), Metrics: metrics.NewSet(), Token: testToken}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Broker.Close()
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: testToken}
	ctx := context.Background()

	if _, err := c.Reconnect(ctx, ReconnectRequest{Directory: "/p", Keep: true, Service: "/state/opencode/service.json"}); err != nil {
		t.Fatalf("keep in the service's server: %v", err)
	}
	if len(a.armed)+len(a.calls) != 0 || len(b.armed) != 1 || b.armed[0] != "/p "+reconnect.ArmedByFlag {
		t.Fatalf("armed %q in the other server, %q in the service's; want /p kept in the service's only", a.armed, b.armed)
	}
	_, err := c.Reconnect(ctx, ReconnectRequest{Directory: "/q", Keep: true, Service: "/other/service.json"})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a service file the daemon does not follow: err = %v, want 404", err)
	}
	if len(a.armed)+len(b.armed) != 1 {
		t.Fatalf("a refused keep armed the directory: %q %q", a.armed, b.armed)
	}
}

// request sends one request to hs with the given Host and headers and
// returns the status code and body.
func request(t *testing.T, hs *httptest.Server, method, path, host string, hdr map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(`{"directory":"/attacker/chosen"}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, hs.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// /events streams: its first bytes are enough.
	b := make([]byte, 4096)
	n, _ := io.ReadAtLeast(resp.Body, b, 1)
	return resp.StatusCode, string(b[:n])
}

var routes = []struct{ method, path string }{
	{"GET", "/status"}, {"GET", "/metrics"}, {"GET", "/events"}, {"POST", "/reconnect"}, {"GET", "/no-such-route"},
	{"GET", "/healthz"}, {"GET", "/readyz"},
}

// DNS rebinding: a page at http://evil.example:PORT whose name now
// resolves to 127.0.0.1 sends Host and Origin both naming evil.example.
// Every route refuses it before any handler runs, even with the token,
// and nothing is armed.
func TestForeignHostRefusedOnEveryRoute(t *testing.T) {
	src, _, hs := newAPI(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hs.URL, "http://"))
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "127.0.0.1.evil.example:" + port,
		"0.0.0.0:" + port, "192.0.2.1:" + port, "[fe80::1]:" + port, "localhostx:" + port} {
		for _, rt := range routes {
			code, body := request(t, hs, rt.method, rt.path, host, map[string]string{
				"Origin": "http://" + host, "Authorization": "Bearer " + testToken, "Sec-Fetch-Site": "same-origin",
			})
			if code != http.StatusForbidden {
				t.Errorf("%s %s with Host %q = %d, want 403", rt.method, rt.path, host, code)
			}
			if strings.Contains(body, "Connection closed") || strings.Contains(body, "mcp_reconnect") {
				t.Errorf("%s %s with Host %q leaked a body: %q", rt.method, rt.path, host, body)
			}
		}
	}
	if len(src.calls) != 0 {
		t.Fatalf("a refused request armed something: %+v", src.calls)
	}
	// An HTTP/1.0 request with no Host at all is refused too.
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /status HTTP/1.0\r\n\r\n")
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.Contains(line, "403") {
		t.Errorf("no Host: %q, want 403", line)
	}
}

func TestLoopbackHostsAccepted(t *testing.T) {
	_, _, hs := newAPI(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hs.URL, "http://"))
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "[::1]:" + port, "127.0.0.2:" + port, "localhost"} {
		for _, rt := range routes[:3] {
			if code, _ := request(t, hs, rt.method, rt.path, host, nil); code != http.StatusOK {
				t.Errorf("%s %s with Host %q = %d, want 200", rt.method, rt.path, host, code)
			}
		}
	}
}

// With --status-public any Host is served (the user put the API on the
// network on purpose), but a mutation still needs the token.
func TestPublicStillNeedsToken(t *testing.T) {
	src := &fakeSource{}
	s := &API{Sources: []Source{src}, Broker: NewBroker(), Metrics: metrics.NewSet(), Token: testToken, Public: true}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Broker.Close()
	if code, _ := request(t, hs, "GET", "/status", "mybox.lan:4097", nil); code != http.StatusOK {
		t.Errorf("public GET /status = %d", code)
	}
	if code, _ := request(t, hs, "POST", "/reconnect", "mybox.lan:4097", nil); code != http.StatusUnauthorized {
		t.Errorf("public POST /reconnect without a token = %d, want 401", code)
	}
	if code, _ := request(t, hs, "POST", "/reconnect", "mybox.lan:4097", map[string]string{"Authorization": "Bearer " + testToken}); code != http.StatusOK {
		t.Errorf("public POST /reconnect with the token = %d", code)
	}
	if len(src.calls) != 1 {
		t.Fatalf("calls = %+v", src.calls)
	}
}

// A mutation without the token, with a wrong one, or with the token of
// another daemon is refused and arms nothing; the right one works.
func TestReconnectNeedsToken(t *testing.T) {
	src, _, hs := newAPI(t)
	other := "another-daemons-token-fedcba9876543210"
	for name, auth := range map[string]string{
		"none":           "",
		"wrong":          "Bearer nope",
		"other daemon":   "Bearer " + other,
		"empty":          "Bearer ",
		"prefix":         "Bearer " + testToken[:len(testToken)-1],
		"longer":         "Bearer " + testToken + "x",
		"basic":          "Basic " + testToken,
		"no scheme":      testToken,
		"lower scheme":   "bearer x",
		"token in query": "",
	} {
		hdr := map[string]string{}
		if auth != "" {
			hdr["Authorization"] = auth
		}
		path := "/reconnect"
		if name == "token in query" {
			path += "?token=" + testToken
		}
		code, body := request(t, hs, "POST", path, "", hdr)
		if code != http.StatusUnauthorized {
			t.Errorf("%s: POST /reconnect = %d, want 401", name, code)
		}
		if strings.Contains(body, testToken) || strings.Contains(body, other) {
			t.Errorf("%s: the refusal echoes a token: %q", name, body)
		}
		if !strings.Contains(body, "mcp-reconnect reconnect") {
			t.Errorf("%s: the refusal does not name the fix: %q", name, body)
		}
	}
	if len(src.calls) != 0 {
		t.Fatalf("a refused mutation armed something: %+v", src.calls)
	}
	if code, _ := request(t, hs, "POST", "/reconnect", "", map[string]string{"Authorization": "Bearer " + testToken}); code != http.StatusOK {
		t.Fatalf("with the right token: %d", code)
	}
	if len(src.calls) != 1 || src.calls[0].Directory != "/attacker/chosen" {
		t.Fatalf("calls = %+v", src.calls)
	}
	// Another daemon's client (holding its own token) is refused here.
	c := &Client{Addr: strings.TrimPrefix(hs.URL, "http://"), Token: other}
	if _, err := c.Reconnect(context.Background(), ReconnectRequest{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("another daemon's token: err = %v", err)
	}
}

// A daemon without a token (misconfigured) refuses every mutation, even
// one that presents an empty token: an empty token must never compare
// equal to the daemon's empty one. Over the wire net/http trims the
// header to "Bearer", which fails the scheme check first, so the empty
// token is handed to the handler directly, as any server that does not
// trim header values would hand it.
func TestNoTokenFailsClosed(t *testing.T) {
	src := &fakeSource{}
	s := &API{Sources: []Source{src}, Broker: NewBroker(), Metrics: metrics.NewSet()}
	defer s.Broker.Close()
	h := s.Handler()
	for _, auth := range []string{"", "Bearer ", "Bearer", "Bearer x"} {
		req := httptest.NewRequest("POST", "http://127.0.0.1:4097/reconnect", strings.NewReader(`{"directory":"/attacker/chosen"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header["Authorization"] = []string{auth}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("auth %q: %d, want 401", auth, rec.Code)
		}
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	for _, auth := range []string{"", "Bearer ", "Bearer x"} {
		if code, _ := request(t, hs, "POST", "/reconnect", "", map[string]string{"Authorization": auth}); code != http.StatusUnauthorized {
			t.Errorf("over the wire, auth %q: %d, want 401", auth, code)
		}
	}
	if len(src.calls) != 0 {
		t.Fatalf("calls = %+v", src.calls)
	}
}

// The token never appears on a read-only route.
func TestReadOnlyRoutesShowNoToken(t *testing.T) {
	_, _, hs := newAPI(t)
	for _, rt := range routes[:3] {
		code, body := request(t, hs, rt.method, rt.path, "", nil)
		if code != http.StatusOK || strings.Contains(body, testToken) {
			t.Errorf("%s %s = %d, shows the token: %v", rt.method, rt.path, code, strings.Contains(body, testToken))
		}
	}
}
