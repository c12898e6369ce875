package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
	"go.uber.org/goleak"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestMain keeps the daemons these tests run out of the user's registry.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpr-daemon-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

func fastConfig() reconnect.Config {
	c := reconnect.DefaultConfig
	c.Backoff.Initial = 10 * time.Millisecond
	c.Backoff.Max = 50 * time.Millisecond
	return c
}

// The assembled daemon arms, recovers a crash, serves its API, keeps
// secrets out of its logs and stops cleanly (goleak checks the last).
func TestRunRecoversAndStops(t *testing.T) {
	fake := fakeopencode.New(map[string]fakeopencode.Spec{
		"remote": {Type: "remote", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer header-secret"}},
		"local":  {},
	})
	fake.Password = "pw-secret"
	fake.SetHeartbeat(time.Second)
	hs := httptest.NewServer(fake)
	defer hs.Close()
	var logs ochost.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{{URL: hs.URL, Password: "pw-secret"}}, StatusAddr: "127.0.0.1:0", Engine: fastConfig(),
			Directories: []string{"/p/one"}, Ready: func(a string) { ready <- a }}, log)
	}()
	addr := <-ready
	waitFor(t, func() bool { return fake.Subscribers() == 1 && fake.Count("/mcp", "/p/one", "") > 0 })
	fake.SetAfterConnect("/p/one", "local", "connected")
	fake.SetAfterConnect("/p/one", "remote", "connected")
	fake.SetStatus("/p/one", "remote", "failed", "Connection closed")
	fake.Crash("/p/one", "local")
	waitFor(t, func() bool { return strings.Count(logs.String(), "reconnected MCP server") == 2 })

	// Each comeback is announced in the TUI, naming no directory (which
	// would create an instance).
	waitFor(t, func() bool { return len(fake.Toasts()) == 2 })
	for _, q := range fake.Requests() {
		if q.Route == "/tui/show-toast" && q.Directory != "" {
			t.Fatalf("a toast named directory %q", q.Directory)
		}
	}
	if msg, _ := fake.Toasts()[0]["message"].(string); !strings.Contains(msg, "reconnected") {
		t.Fatalf("toast = %+v", fake.Toasts()[0])
	}

	c := &statusapi.Client{Addr: addr}
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Servers[0].Directories; len(d) != 1 || d[0].ArmedBy != "--directory" {
		t.Fatalf("status directories = %+v", d)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for _, secret := range []string{"pw-secret", "header-secret"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("a secret (%s) reached the logs", secret)
		}
	}
}

func TestRunRefusesWrongPasswordClearly(t *testing.T) {
	fake := fakeopencode.New(nil)
	fake.Password = "right"
	hs := httptest.NewServer(fake)
	defer hs.Close()
	err := Run(context.Background(), Config{Servers: []Target{{URL: hs.URL, Password: "wrong-pw"}}, Engine: reconnect.DefaultConfig}, slog.New(slog.DiscardHandler))
	if !errors.Is(err, opencode.ErrUnauthorized) || !strings.Contains(err.Error(), "OPENCODE_SERVER_PASSWORD") || strings.Contains(err.Error(), "wrong-pw") {
		t.Fatalf("err = %v", err)
	}
	// Detection asks 2.x's /api/info, then 1.x's /global/health: two
	// refused requests, then the daemon stops.
	if n := fake.Count("401", "", ""); n != 2 {
		t.Fatalf("%d refused requests, want 2", n)
	}
}

func TestRunRejectsPublicStatusAddr(t *testing.T) {
	err := Run(context.Background(), Config{Servers: []Target{{URL: "http://127.0.0.1:1"}}, StatusAddr: "0.0.0.0:4097", Engine: reconnect.DefaultConfig}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "--status-public") {
		t.Fatalf("err = %v", err)
	}
}

// An OpenCode that is not up yet is waited for, not fatal.
func TestRunWaitsForOpenCode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var logs ochost.Buffer
	err := Run(ctx, Config{Servers: []Target{{URL: "http://127.0.0.1:1"}}, Engine: reconnect.DefaultConfig}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("Run = %v, want nil after the context ends", err)
	}
	if !strings.Contains(logs.String(), "waiting for it") {
		t.Fatalf("logs = %s", logs.String())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The daemon registers its status address and token while it runs (0600
// in 0700), the token drives POST /reconnect and nothing else does, the
// token never reaches the logs or /status, and the file is gone on exit.
func TestRunRegistersAndUnregisters(t *testing.T) {
	fake := fakeopencode.New(map[string]fakeopencode.Spec{"local": {}})
	fake.SetHeartbeat(time.Second)
	hs := httptest.NewServer(fake)
	defer hs.Close()
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	var logs ochost.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before hs.Close, which waits for the daemon's event stream
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{{URL: hs.URL}}, StatusAddr: "127.0.0.1:0", Engine: fastConfig(), Registry: reg, Version: "vtest",
			Ready: func(a string) { ready <- a }}, log)
	}()
	addr := <-ready
	ents, err := reg.List()
	if err != nil || len(ents) != 1 {
		t.Fatalf("registry = %+v, %v", ents, err)
	}
	e := ents[0]
	if e.PID != os.Getpid() || e.StatusAddr != addr || len(e.URLs) != 1 || e.URLs[0] != hs.URL || len(e.Token) < 32 || e.Version != "vtest" || e.Started.IsZero() {
		t.Fatalf("entry = %+v", e)
	}
	for path, want := range map[string]os.FileMode{reg.Dir: 0o700, filepath.Join(reg.Dir, strconv.Itoa(e.PID)+".json"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %v", path, fi, err, want)
		}
	}
	if _, err := (&statusapi.Client{Addr: addr}).Reconnect(context.Background(), statusapi.ReconnectRequest{Directory: "/p/x"}); err == nil {
		t.Fatal("a reconnect without the token was accepted")
	}
	// Ready comes before the engine runs: retry until it takes the request.
	var rerr error
	waitFor(t, func() bool {
		_, rerr = (&statusapi.Client{Addr: addr, Token: e.Token}).Reconnect(context.Background(), statusapi.ReconnectRequest{Directory: "/p/x"})
		return rerr == nil || !strings.Contains(rerr.Error(), "engine not running")
	})
	if rerr != nil {
		t.Fatalf("with the registry's token: %v", rerr)
	}
	waitFor(t, func() bool { return fake.Count("/mcp", "/p/x", "") > 0 })
	st, err := (&statusapi.Client{Addr: addr}).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(st); strings.Contains(string(b), e.Token) {
		t.Fatal("/status shows the token")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ents, _ := reg.List(); len(ents) != 0 {
		t.Fatalf("still registered after exit: %+v", ents)
	}
	if strings.Contains(logs.String(), e.Token) {
		t.Fatal("the token reached the logs")
	}
}

// What a server lacks is a capability the daemon says it runs without, in
// status too: a server whose config route answered 404 (no such route)
// runs with the server kinds unknown; 2.1.2 lacks nothing; a system
// without the process view (macOS) lacks processes; nothing is said (and
// nothing asked) before a detection.
func TestStatusSaysWhatTheServerRunsWithout(t *testing.T) {
	noConfig := fake2.New(map[string]fakeopencode.Spec{"s": {}})
	noConfig.SetDoc([]byte(strings.Replace(fake2.DefaultDoc, `"/api/config":`, `"/api/config-gone":`, 1)))
	for _, tc := range []struct {
		name    string
		fake    *fake2.Server
		noView  error
		without []string
	}{
		{"no config route", noConfig, nil, []string{"config"}},
		{"2.1.2", fake2.New(map[string]fakeopencode.Spec{"s": {}}), nil, nil},
		{"no process view", fake2.New(map[string]fakeopencode.Spec{"s": {}}), errors.ErrUnsupported, []string{"processes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hosts := fakeopencode.NewHosts()
				defer hosts.Close()
				hosts.Serve(host2, tc.fake)
				client, err := opencode.NewServer(opencode.ServerOptions{URL: "http://" + host2,
					Client: opencode.Options{Password: fake2.DefaultPassword, Transport: hosts.Transport()}})
				if err != nil {
					t.Fatal(err)
				}
				if info := about(client, tc.noView); info != nil || len(tc.fake.Requests()) != 0 {
					t.Fatalf("before a detection: %+v, %d requests", info, len(tc.fake.Requests()))
				}
				if _, _, err := client.Detect(context.Background()); err != nil {
					t.Fatal(err)
				}
				_, _ = client.MCPConfig(context.Background(), "/p")
				info := about(client, tc.noView)
				if info == nil || info.Generation != "2.x" {
					t.Fatalf("about = %+v", info)
				}
				var names []string
				for _, w := range info.RunsWithout {
					name, _, _ := strings.Cut(w, " ")
					names = append(names, name)
				}
				if !slices.Equal(names, tc.without) {
					t.Fatalf("runs without %q, want %q", info.RunsWithout, tc.without)
				}
			})
		})
	}
}

// The shared connect budget is one FIFO line for every
// server. Server one has six directories whose failed local MCP server
// hangs in connect (70 s, under the 75 s connect timeout); server two's
// MCP server crashes once. Its first reconnect waits behind every hanging
// connect of server one (two slots, six 70 s connects ahead of it: about
// 140 s), so one server's hang delays another server's recovery by
// minutes. Rule 5 bounds connects "across all directories" but says
// nothing about servers, and one server's trouble must not affect
// another. This test asks that server two recovers within a
// minute of its crash.
func TestHangingServerDoesNotStarveAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"a": {Status: "failed", ConnectDelay: 70 * time.Second}})
		v1.Password = "one-pw"
		v1.SetHeartbeat(10 * time.Second)
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "connected", AfterConnect: "connected"}})
		v2.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve(host1, v1)
		hosts.Serve(host2, v2)
		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		ec.MaxConcurrent = 2
		cfg := Config{
			Servers: []Target{
				{URL: "http://" + host1, Password: "one-pw", Directories: []string{"/a1", "/a2", "/a3", "/a4", "/a5", "/a6"}, Transport: hosts.Transport()},
				{URL: "http://" + host2, Password: fake2.DefaultPassword, Directories: []string{"/b"}, Transport: hosts.Transport()},
			},
			Engine: ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		v2.Crash("/b", "b")
		time.Sleep(60 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteConnect, "/b", "b"); n == 0 {
			t.Fatalf("server two's crashed MCP server got no connect in the 60 s after its crash: server one's hanging connects hold the shared budget (%d connects of server one so far)",
				v1.Count("/mcp/{name}/connect", "", ""))
		}
	})
}

// Run detects every server one after the other, each for up to
// 5 s, before any engine, stream or the status API starts. A server that
// accepts connections and never answers (a hung OpenCode) listed first
// delays every other server by 5 s each (N hung servers: N×5 s), and the
// status API with them. Server two's failed MCP server should get its
// first connect at initial-delay (1 s), as it would alone.
func TestHungServerDoesNotDelayTheOthersStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hung := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", AfterConnect: "connected"}})
		v2.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve("hung-1:4096", hung)
		hosts.Serve("hung-2:4096", hung)
		hosts.Serve(host2, v2)
		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		cfg := Config{
			Servers: []Target{
				{URL: "http://hung-1:4096", Transport: hosts.Transport()},
				{URL: "http://hung-2:4096", Transport: hosts.Transport()},
				{URL: "http://" + host2, Password: fake2.DefaultPassword, Directories: []string{"/b"}, Transport: hosts.Transport()},
			},
			Engine: ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteConnect, "/b", "b"); n == 0 {
			t.Fatal("3 s after start, server two's failed MCP server got no connect: Run is still detecting the hung servers listed before it (5 s each)")
		}
	})
}

// An OpenCode that starts after the daemon: the daemon says once that it
// waits for it, and once that it watches it when it answers (the user who
// read the first line learns that it caught up).
func TestOpenCodeThatStartsLaterIsSaidToBeWatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		logs := &logBuffer{}
		cfg := Config{
			Servers: []Target{{URL: "http://" + host2, Password: fake2.DefaultPassword, Transport: hosts.Transport()}},
			Engine:  reconnect.DefaultConfig, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil))) }()
		defer func() {
			cancel()
			<-done
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if !strings.Contains(logs.String(), "opencode not reachable yet") || strings.Contains(logs.String(), `msg="watching opencode"`) {
			t.Fatalf("before OpenCode answers:\n%s", logs)
		}
		hosts.Serve(host2, fake2.New(nil))
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := strings.Count(logs.String(), `msg="watching opencode"`); n != 1 || !strings.Contains(logs.String(), "generation=2.x") {
			t.Fatalf("once OpenCode answers, the daemon said it watches it %d times (want once, with its generation):\n%s", n, logs)
		}
	})
}

const (
	host1 = "opencode-one:4096"
	host2 = "opencode-two:49374"
)

// connectGauge counts connect calls in flight across every server.
type connectGauge struct {
	next         http.RoundTripper
	mu           sync.Mutex
	now, maximum int
}

func (g *connectGauge) RoundTrip(r *http.Request) (*http.Response, error) {
	connect := r.Method == "POST" && len(r.URL.Path) > len("/connect") && r.URL.Path[len(r.URL.Path)-len("/connect"):] == "/connect"
	if connect {
		g.mu.Lock()
		g.now++
		g.maximum = max(g.maximum, g.now)
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.now--
			g.mu.Unlock()
		}()
	}
	return g.next.RoundTrip(r)
}

// runTwo runs one daemon over a 1.x and a 2.x fake, each with directory /p
// armed, until the test ends.
func runTwo(t *testing.T, v1 *fakeopencode.Server, v2 *fake2.Server, maxConcurrent int) (*fakeopencode.Hosts, *connectGauge) {
	hosts := fakeopencode.NewHosts()
	hosts.Serve(host1, v1)
	hosts.Serve(host2, v2)
	gauge := &connectGauge{next: hosts.Transport()}
	ec := reconnect.DefaultConfig
	ec.Backoff.Jitter = 0
	ec.MaxConcurrent = maxConcurrent
	cfg := Config{
		Servers: []Target{
			{URL: "http://" + host1, Password: "one-pw", Directories: []string{"/p"}, Transport: gauge},
			{URL: "http://" + host2, Password: fake2.DefaultPassword, Directories: []string{"/p"}, Transport: gauge},
		},
		Engine: ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		hosts.Close()
	})
	return hosts, gauge
}

// One daemon watches a 1.x and a 2.x server: each recovers its own failed
// server, and one of them gone for 30 s changes nothing for the other.
func TestOneDaemonTwoServers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"a": {Status: "failed", AfterConnect: "connected"}})
		v1.Password = "one-pw"
		v1.SetHeartbeat(10 * time.Second)
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", AfterConnect: "connected"}})
		hosts, _ := runTwo(t, v1, v2, 2)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := v1.Count("/mcp/{name}/connect", "/p", "a"); n != 1 {
			t.Fatalf("1.x connects of a = %d, want 1", n)
		}
		if n := v2.Count(fake2.RouteConnect, "/p", "b"); n != 1 {
			t.Fatalf("2.x connects of b = %d, want 1", n)
		}

		// The 1.x server goes away for 30 s; the 2.x server's b crashes
		// meanwhile and is brought back as usual.
		hosts.Stop(host1)
		time.Sleep(2 * time.Second)
		v2.Crash("/p", "b")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteConnect, "/p", "b"); n != 2 {
			t.Fatalf("2.x connects of b while 1.x was down = %d, want 2", n)
		}
		time.Sleep(25 * time.Second)
		hosts.Serve(host1, v1)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteUnauthorized, "", ""); n != 0 {
			t.Fatalf("%d refused requests on 2.x", n)
		}
		// 1.x restarted (it refused connections): its directory is
		// forgotten until used again; a session there arms it.
		v1.Publish("/p", "session.updated", nil)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := v1.Count("/mcp", "/p", ""); n < 2 {
			t.Fatalf("1.x status reads of /p after its return = %d", n)
		}
	})
}

// The connect budget is shared by every server: with --max-concurrent 1
// and a connect that hangs on each, only one is in flight at a time.
func TestBudgetSharedAcrossServers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"a": {Status: "failed", ConnectDelay: 50 * time.Second}})
		v1.Password = "one-pw"
		v1.SetHeartbeat(10 * time.Second)
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", ConnectDelay: 50 * time.Second}})
		_, gauge := runTwo(t, v1, v2, 1)
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		gauge.mu.Lock()
		most := gauge.maximum
		gauge.mu.Unlock()
		if most != 1 {
			t.Fatalf("connects in flight at once across both servers = %d, want 1", most)
		}
		if v1.Count("/mcp/{name}/connect", "/p", "a") == 0 || v2.Count(fake2.RouteConnect, "/p", "b") == 0 {
			t.Fatal("one server never got a slot")
		}
	})
}

// One server refusing the password does not stop the daemon or the other
// server.
func TestOneServerRefusingThePasswordLeavesTheOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"a": {Status: "failed"}})
		v1.Password = "not-what-the-daemon-has"
		v2 := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", AfterConnect: "connected"}})
		runTwo(t, v1, v2, 2)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := v2.Count(fake2.RouteConnect, "/p", "b"); n != 1 {
			t.Fatalf("2.x connects of b = %d, want 1", n)
		}
		if n := v1.Count("/mcp/{name}/connect", "", ""); n != 0 {
			t.Fatalf("%d connects on the server that refused the password", n)
		}
	})
}

// Rule 8: from the moment OpenCode refuses connections (it is
// restarting) every directory is forgotten, and stays forgotten until a
// later event arms it. The event stream sees the refusal first (here at
// 10 s); the engine must learn it from the stream then, not from its own
// next refused call or the stream's next successful subscribe (up to 36 s
// later): a directory whose check falls after OpenCode is back, but before
// the stream tries again, would read the new process and re-create its
// instance and every MCP server it configures, for a directory nobody
// uses.
func TestRestartSeenByTheStreamForgetsDirectoriesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		specs := map[string]fakeopencode.Spec{"s": {}}
		old := fakeopencode.New(specs)
		old.Password = "pw"
		old.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve(host1, old)
		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		ec.IdleInterval = 10 * time.Minute
		cfg := Config{
			Servers: []Target{{URL: "http://" + host1, Password: "pw", Transport: hosts.Transport()}},
			Engine:  ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		old.Publish("/p", "session.updated", nil) // a client uses /p: armed, checked at 2 s
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if old.Count("/mcp", "/p", "") != 1 {
			t.Fatalf("setup: /p not checked once (%d)", old.Count("/mcp", "/p", ""))
		}

		// OpenCode stops at 10 s: the stream's re-subscribes are refused
		// from then on; /p has no check due until 602 s.
		time.Sleep(7 * time.Second)
		hosts.Stop(host1)
		// It is back (a new process, no instance) just before /p's check.
		time.Sleep(start.Add(601*time.Second + 900*time.Millisecond).Sub(time.Now()))
		fresh := fakeopencode.New(specs)
		fresh.Password = "pw"
		fresh.SetHeartbeat(10 * time.Second)
		hosts.Serve(host1, fresh)
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if n := fresh.Count("/mcp", "/p", ""); n != 0 || len(fresh.Instances()) != 0 {
			t.Fatalf("the restarted OpenCode got %d status reads of /p (instances now %v) although no event armed /p after the restart; the stream had seen it refuse connections for %v",
				n, fresh.Instances(), 590*time.Second)
		}
	})
}

// The news also arrives on another path: an OpenCode 2 service replaced
// on the same port within one backoff step is refused by nobody, but its
// new pid, read when the stream looks at once after its drop, makes the
// engine forget every directory armed in the old process.
func TestReplacedServiceSeenByItsPidForgetsDirectories(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		specs := map[string]fakeopencode.Spec{"s": {}}
		old := fake2.New(specs)
		old.SetHeartbeat(10 * time.Second)
		hosts := fakeopencode.NewHosts()
		hosts.Serve(host2, old)
		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		ec.IdleInterval = 10 * time.Minute
		cfg := Config{
			Servers: []Target{{URL: "http://" + host2, Password: fake2.DefaultPassword, Transport: hosts.Transport()}},
			Engine:  ec, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
		defer func() {
			cancel()
			<-done
			hosts.Close()
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		old.Boot("/p") // a session there
		old.Publish("/p", "session.created", map[string]any{"sessionID": "ses_1"})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if old.Count(fake2.RouteMCP, "/p", "") == 0 {
			t.Fatal("setup: /p was not checked in the old service")
		}
		fresh := fake2.New(specs)
		fresh.PID = old.PID + 1
		fresh.SetHeartbeat(10 * time.Second)
		hosts.Serve(host2, fresh) // replaced at once: no request is ever refused
		time.Sleep(15 * time.Minute)
		synctest.Wait()
		if n := fresh.Count(fake2.RouteMCP, "/p", ""); n != 0 {
			t.Fatalf("the replacing service got %d status reads of /p, armed only in the old one", n)
		}
	})
}

// A --directory reached through a symlink is the directory the TUI uses,
// its physical path (getcwd): OpenCode keys an instance (2.x: a location)
// by the exact string it is sent, so the link's path would boot a second
// instance, and a second MCP fleet, beside the TUI's. On either
// generation.
func TestDirectoryFlagThroughSymlinkIsThePhysicalDirectory(t *testing.T) {
	physical, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "code")
	if err := os.Symlink(physical, link); err != nil {
		t.Fatal(err)
	}
	type fake interface {
		http.Handler
		SetHeartbeat(time.Duration)
		Instances() []string
	}
	for _, gen := range []struct {
		name, host, password string
		new                  func() fake
		activity             string
	}{
		{"1.x", host1, "pw", func() fake {
			f := fakeopencode.New(map[string]fakeopencode.Spec{"fs": {}})
			f.Password = "pw"
			return f
		}, "session.updated"},
		{"2.x", host2, fake2.DefaultPassword, func() fake { return fake2.New(map[string]fakeopencode.Spec{"fs": {}}) }, "session.created"},
	} {
		t.Run(gen.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := gen.new()
				f.SetHeartbeat(10 * time.Second)
				hosts := fakeopencode.NewHosts()
				hosts.Serve(gen.host, f)
				cfg := Config{
					Servers:     []Target{{URL: "http://" + gen.host, Password: gen.password, Transport: hosts.Transport()}},
					Directories: []string{link}, // the user's --directory
					Engine:      reconnect.DefaultConfig, NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
				defer func() {
					cancel()
					<-done
					hosts.Close()
				}()
				time.Sleep(time.Second)
				synctest.Wait()
				// The TUI, started in that project, names its getcwd.
				switch p := f.(type) {
				case *fakeopencode.Server:
					p.Publish(physical, gen.activity, nil)
				case *fake2.Server:
					p.Publish(physical, gen.activity, map[string]any{"sessionID": "ses_1"})
				}
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if inst := f.Instances(); len(inst) != 1 || inst[0] != physical {
					t.Fatalf("instances %q: the --directory %s (-> %s) must be the one instance %s", inst, link, physical, physical)
				}
			})
		})
	}
}

// A directory that does not exist (yet) is only made absolute.
func TestPhysicalDirOfMissingDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not", "yet")
	got, err := PhysicalDir(missing)
	if err != nil || got != missing {
		t.Fatalf("PhysicalDir(%s) = %q, %v", missing, got, err)
	}
}
