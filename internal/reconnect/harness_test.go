package reconnect

import (
	"context"
	"encoding/json"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"go.uber.org/goleak"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is an engine wired to an in-process fake OpenCode of either
// generation over an in-memory pipe, inside a synctest bubble. The engine
// reaches it through opencode.Server, which detects the generation once at
// start, as the daemon does.
type rig struct {
	t      *testing.T
	fake   fakeOC
	client *opencode.Server
	eng    *Engine
	start  time.Time
	mu     sync.Mutex
	events []Event
	wire   []string // every HTTP request the fake received: "METHOD path"
}

// noJitter is the default config without jitter, so times are exact.
func noJitter() Config {
	c := DefaultConfig
	c.Backoff.Jitter = 0
	return c
}

// newRig starts the engine; call only inside synctest.Test. Everything is
// stopped by t.Cleanup before the bubble ends.
func newRig(t *testing.T, fake fakeOC, cfg Config, budget *Budget) *rig {
	return newRigWith(t, fake, cfg, Options{Budget: budget})
}

// newRigWith is newRig with more engine options.
func newRigWith(t *testing.T, fake fakeOC, cfg Config, o Options) *rig {
	t.Helper()
	r := &rig{t: t, fake: fake, start: time.Now()}
	tr, stopFake := r.serve()
	url := fakeopencode.URL
	if f, ok := fake.(*fakeV2); ok && f.localConfig() {
		// No GET /api/config (the v2 preview build): the client reads
		// the config files OpenCode reads, and only for a server on
		// this machine. The pipe answers at any address.
		url = "http://127.0.0.1:4096"
		home := t.TempDir()
		t.Setenv("OPENCODE_CONFIG_DIR", home)
		t.Setenv("OPENCODE_CONFIG", home+"/opencode.json")
		f.useConfigFile(home + "/opencode.json")
	}
	client, err := opencode.NewServer(opencode.ServerOptions{URL: url, Client: opencode.Options{Transport: tr, Password: fake.Secret()}})
	if err != nil {
		t.Fatal(err)
	}
	r.client = client
	// The daemon detects the generation once at start.
	if gen, _, err := client.Detect(context.Background()); err != nil || gen.String() != map[string]string{"v1": "1.x", "v2": "2.x"}[fake.Gen()] {
		t.Fatalf("detected %v, %v; want the %s fake's generation", gen, err, fake.Gen())
	}
	o.URL = fakeopencode.URL
	o.OnEvent = func(ev Event) {
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
	}
	r.eng, err = New(cfg, client, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.eng.Run(ctx)
	}()
	synctest.Wait()
	t.Cleanup(func() {
		cancel()
		<-done
		stopFake()
	})
	return r
}

// serve serves the fake on an in-memory pipe, noting every request that
// reaches it (the fakes record only the routes they know), and returns
// the transport to reach it and a function that stops it.
func (r *rig) serve() (*http.Transport, func()) {
	return fakeopencode.ServeHandler(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		r.mu.Lock()
		r.wire = append(r.wire, q.Method+" "+q.URL.Path)
		r.mu.Unlock()
		r.fake.ServeHTTP(w, q)
	}))
}

// wireRequests is every HTTP request the fake received.
func (r *rig) wireRequests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.wire...)
}

// at advances the fake clock to d after the rig started and lets every
// goroutine settle.
func (r *rig) at(d time.Duration) {
	r.t.Helper()
	if wait := time.Until(r.start.Add(d)); wait > 0 {
		time.Sleep(wait)
	}
	synctest.Wait()
}

// connectTimes is when each connect for name in dir was received, relative
// to the rig's start.
func (r *rig) connectTimes(dir, name string) []time.Duration {
	var out []time.Duration
	for _, q := range r.fake.Requests() {
		if q.Route == routeConnect && q.Directory == dir && q.Name == name {
			out = append(out, q.Time.Sub(r.start))
		}
	}
	return out
}

func (r *rig) eventsOf(typ string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (r *rig) server(dir, name string) ServerSnapshot {
	for _, d := range r.eng.Snapshot().Directories {
		if d.Directory == dir {
			for _, s := range d.Servers {
				if s.Name == name {
					return s
				}
			}
		}
	}
	r.t.Fatalf("no server %q in %q in snapshot", name, dir)
	return ServerSnapshot{}
}

func secs(ds ...float64) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = time.Duration(d * float64(time.Second))
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stream subscribes the engine to the fake's event stream, as the daemon
// does, until the test ends.
func (r *rig) stream() {
	if r.fake.Gen() == "v1" {
		r.fake.SetHeartbeat(10 * time.Second) // as OpenCode 1.x does: the stream stays up
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.client.Stream(ctx, opencode.StreamOptions{}, r.eng.HandleEvent)
	}()
	synctest.Wait()
	r.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// perDirRequests counts requests that name a directory.
func (r *rig) perDirRequests() []request {
	var out []request
	for _, q := range r.fake.Requests() {
		if q.Directory != "" {
			out = append(out, q)
		}
	}
	return out
}

// Snapshot copies the engine's state: Summary and every directory.
func (e *Engine) Snapshot() Snapshot {
	s := e.Summary()
	s.Directories = slices.AppendSeq([]DirSnapshot{}, e.Directories())
	return s
}

// Disarm stops watching dir and forgets it, as a disposal does.
func (e *Engine) Disarm(path, reason string) {
	e.mu.Lock()
	ev := e.disarmLocked(path, reason)
	e.mu.Unlock()
	e.publish(ev)
}

// Every test of the engine runs against both OpenCode generations: each
// gets a fake of each, behind fakeOC, and the rig reaches it through
// opencode.Server, which detects the generation as the daemon does.
// Expectations differ only where the generations really do, each with a
// comment saying why.

// Spec is one configured MCP server, for either fake.
type Spec = fakeopencode.Spec

// Neutral names of the routes a fake records; each adapter maps its
// generation's routes onto them.
const (
	routeStatus  = "status"  // 1.x GET /mcp, 2.x GET /api/mcp
	routeConnect = "connect" // 1.x POST /mcp/{name}/connect, 2.x POST /api/experimental/mcp/{name}/connect
	routeConfig  = "config"  // 1.x GET /config, 2.x GET /api/config
	routeEvent   = "event"   // 1.x GET /global/event, 2.x GET /api/event
	routeDetect  = "detect"  // what detection asks: 1.x GET /global/health, 2.x GET /api/info
	route401     = "401"     // refused credentials
)

// request is one request a fake recorded, with a neutral route.
type request struct {
	Time      time.Time
	Route     string
	Directory string
	Name      string
}

// fakeOC is what the engine's tests do with a fake OpenCode, whatever its
// generation.
type fakeOC interface {
	http.Handler
	// Gen is "v1" or "v2".
	Gen() string
	// Secret is the password the rig's client sends.
	Secret() string
	// ChangePassword makes the server want another password.
	ChangePassword(pw string)

	SetDirConfig(dir string, servers map[string]Spec)
	// SetStatus changes a server's state silently.
	SetStatus(dir, name, status, errText string)
	SetAfterConnect(dir, name, status string)
	AddServer(dir, name string, sp Spec)
	RemoveServer(dir, name string)
	SetStatusOverride(f func(dir string) (code int, body string, hang bool))
	SetStatusDelay(d time.Duration)
	SetHeartbeat(d time.Duration)
	FailConfig(n int)

	// Crash fails a live server with "Connection closed" and publishes
	// what the generation publishes then (1.x mcp.tools.changed, 2.x
	// mcp.status.changed).
	Crash(dir, name string)
	// ReportCrash publishes only that event.
	ReportCrash(dir, name string)
	// Activity publishes a session event in dir (1.x session.updated, 2.x
	// session.execution.started).
	Activity(dir string)
	// Dispose drops dir's instance and says so (1.x
	// server.instance.disposed, 2.x location.shutdown).
	Dispose(dir string)
	// DisposeAll drops every instance and says so (1.x global.disposed;
	// 2.x has no global dispose: POST /api/location/reload's effect, a
	// location.shutdown for each location).
	DisposeAll()
	// Publish sends an event of the generation's envelope; PublishRaw a
	// raw data field.
	Publish(dir, typ string, props map[string]any)
	PublishRaw(data []byte)
	// ArmingTypes are the generation's event types that arm a directory;
	// CrashType is the one a crash publishes.
	ArmingTypes() []string
	CrashType() string

	Requests() []request
	// Count counts recorded requests by neutral route, directory and name
	// ("" any).
	Count(route, dir, name string) int
	ResetRequests()
	Instances() []string
	Starts(dir, name string) int
	MaxConcurrentConnects() int
	MaxConcurrentReads() int
}

// generation makes fakes of one OpenCode generation.
type generation struct {
	name string
	new  func(map[string]Spec) fakeOC
}

var generations = []generation{
	{"v1", func(s map[string]Spec) fakeOC { return &fake1{fakeopencode.New(s)} }},
	{"v2", func(s map[string]Spec) fakeOC { return &fakeV2{Server: fake2.New(s)} }},
}

// eachGen runs f in a synctest bubble once per generation (and 2.x
// profile), as subtests v1, v2 and v2preview.
func eachGen(t *testing.T, f func(t *testing.T, g generation)) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { f(t, g) })
		})
	}
}

// --- 1.x ---

type fake1 struct{ *fakeopencode.Server }

func (f *fake1) Gen() string              { return "v1" }
func (f *fake1) Secret() string           { return f.Password }
func (f *fake1) ChangePassword(pw string) { f.Password = pw }
func (f *fake1) CrashType() string        { return "mcp.tools.changed" }
func (f *fake1) Activity(dir string)      { f.Publish(dir, "session.updated", nil) }
func (f *fake1) DisposeAll()              { f.Publish("global", "global.disposed", nil) }
func (f *fake1) ReportCrash(dir, n string) {
	f.Publish(dir, f.CrashType(), map[string]any{"server": n})
}
func (f *fake1) ArmingTypes() []string {
	return []string{"mcp.tools.changed", "session.created", "session.updated", "session.status", "message.updated", "message.part.updated"}
}

var routes1 = map[string]string{
	"/mcp": routeStatus, "/mcp/{name}/connect": routeConnect, "/config": routeConfig,
	"/global/event": routeEvent, "/global/health": routeDetect, "401": route401,
}

func (f *fake1) Requests() []request {
	var out []request
	for _, q := range f.Server.Requests() {
		route, ok := routes1[q.Route]
		if !ok {
			route = q.Route
		}
		out = append(out, request{Time: q.Time, Route: route, Directory: q.Directory, Name: q.Name})
	}
	return out
}

func (f *fake1) Count(route, dir, name string) int { return count(f.Requests(), route, dir, name) }

// --- 2.x ---

type fakeV2 struct {
	*fake2.Server
	// files, for a profile without GET /api/config, is what the config
	// files say (per directory, "" for every one), written to file: the
	// client reads them as OpenCode would.
	mu    sync.Mutex
	files map[string]map[string]Spec
	file  string
}

// localConfig tells the rig this fake has no config route: its client
// must reach it at a loopback address, with its config in file.
func (f *fakeV2) localConfig() bool { return f.files != nil }

// useConfigFile makes file the config the client reads, and writes it.
func (f *fakeV2) useConfigFile(file string) {
	f.mu.Lock()
	f.file = file
	f.mu.Unlock()
	f.writeConfig()
}

// writeConfig writes every directory's servers into one config file in
// 2.x's shape (a directory's own servers win over the default ones of
// the same name).
func (f *fakeV2) writeConfig() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.file == "" {
		return
	}
	servers := map[string]any{}
	dirs := make([]string, 0, len(f.files))
	for d := range f.files {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs) // "" first
	for _, d := range dirs {
		for name, sp := range f.files[d] {
			e := map[string]any{"type": "local", "command": []string{"node", "server.js"}}
			if sp.Type == "remote" {
				e = map[string]any{"type": "remote", "url": sp.URL}
			}
			if sp.Status == "disabled" {
				e["disabled"] = true
			}
			servers[name] = e
		}
	}
	b, _ := json.Marshal(map[string]any{"mcp": map[string]any{"servers": servers}})
	if err := os.WriteFile(f.file, b, 0o600); err != nil {
		panic(err)
	}
}

func (f *fakeV2) SetDirConfig(dir string, servers map[string]Spec) {
	f.Server.SetDirConfig(dir, servers)
	if f.localConfig() {
		f.mu.Lock()
		f.files[dir] = servers
		f.mu.Unlock()
		f.writeConfig()
	}
}

func (f *fakeV2) AddServer(dir, name string, sp Spec) {
	f.Server.AddServer(dir, name, sp)
	if f.localConfig() {
		f.mu.Lock()
		m := maps.Clone(f.files[dir])
		if m == nil {
			m = map[string]Spec{}
		}
		m[name] = sp
		f.files[dir] = m
		f.mu.Unlock()
		f.writeConfig()
	}
}

func (f *fakeV2) Gen() string              { return "v2" }
func (f *fakeV2) Secret() string           { return f.Password }
func (f *fakeV2) ChangePassword(pw string) { f.SetPassword(pw) }
func (f *fakeV2) CrashType() string        { return "mcp.status.changed" }
func (f *fakeV2) Activity(dir string) {
	f.Boot(dir) // a client at work there: its location runs
	id := "ses_" + dir
	if f.Profile().ExecutionWithoutLocation {
		// A prompt: its input carries the location, its execution
		// (stripped by this profile) only the session.
		f.Publish(dir, "session.input.admitted", map[string]any{"sessionID": id, "inputID": "msg_1"})
	}
	f.Publish(dir, "session.execution.started", map[string]any{"sessionID": id})
}
func (f *fakeV2) DisposeAll() { f.Reload() }
func (f *fakeV2) ReportCrash(dir, n string) {
	f.Publish(dir, f.CrashType(), map[string]any{"server": n})
}
func (f *fakeV2) ArmingTypes() []string {
	if f.Profile().ExecutionWithoutLocation {
		// Execution events reach the engine without a location until
		// their session was seen with one.
		return []string{"mcp.status.changed", "session.created", "session.input.admitted", "session.step.started", "session.text.delta", "session.status"}
	}
	return []string{"mcp.status.changed", "session.created", "session.execution.started", "session.execution.succeeded", "session.step.started", "session.text.delta", "session.status"}
}

var routes2 = map[string]string{
	fake2.RouteMCP: routeStatus, fake2.RouteConnect: routeConnect, fake2.RouteConnectDev: routeConnect, fake2.RouteConfig: routeConfig,
	fake2.RouteEvent: routeEvent, fake2.RouteInfo: routeDetect, fake2.RouteHealthV2: routeDetect, fake2.RouteUnauthorized: route401,
}

func (f *fakeV2) Requests() []request {
	var out []request
	for _, q := range f.Server.Requests() {
		route, ok := routes2[q.Route]
		if !ok {
			route = q.Route
		}
		out = append(out, request{Time: q.Time, Route: route, Directory: q.Directory, Name: q.Name})
	}
	return out
}

func (f *fakeV2) Count(route, dir, name string) int { return count(f.Requests(), route, dir, name) }

func count(reqs []request, route, dir, name string) int {
	n := 0
	for _, r := range reqs {
		if (route == "" || r.Route == route) && (dir == "" || r.Directory == dir) && (name == "" || r.Name == name) {
			n++
		}
	}
	return n
}

// noShutdownEvent reports whether fake is an OpenCode 2 that announces no
// location.shutdown (the preview build).
func noShutdownEvent(fake fakeOC) bool {
	f2, ok := fake.(*fakeV2)
	return ok && f2.Profile().NoShutdownEvent
}

// noConfigRoute reports whether fake is an OpenCode 2 without GET
// /api/config (the preview build: the daemon reads the config files).
func noConfigRoute(fake fakeOC) bool {
	f2, ok := fake.(*fakeV2)
	return ok && f2.localConfig()
}

// ocStub is a minimal OpenCode for engine tests that need exact control:
// statuses,
// config and connect behaviour set per directory and server, every call
// recorded with its (fake) time.
type ocStub struct {
	mu       sync.Mutex
	status   map[string]map[string]opencode.MCPServerStatus
	config   map[string]opencode.MCPEntry
	delay    map[string]time.Duration // connect duration by server name
	after    map[string]string        // status a connect leaves, by server name
	readErr  error
	calls    []stubCall
	inFlight int
}

type stubCall struct {
	at        time.Time
	op        string // "status", "connect", "config"
	dir, name string
}

func newStub() *ocStub {
	return &ocStub{status: map[string]map[string]opencode.MCPServerStatus{}, config: map[string]opencode.MCPEntry{},
		delay: map[string]time.Duration{}, after: map[string]string{}}
}

func (o *ocStub) set(dir, name, status string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.status[dir] == nil {
		o.status[dir] = map[string]opencode.MCPServerStatus{}
	}
	o.status[dir][name] = opencode.MCPServerStatus{Status: status}
}

func (o *ocStub) MCPStatus(ctx context.Context, dir string) (map[string]opencode.MCPServerStatus, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, stubCall{time.Now(), "status", dir, ""})
	if o.readErr != nil {
		return nil, o.readErr
	}
	out := map[string]opencode.MCPServerStatus{}
	for k, v := range o.status[dir] {
		out[k] = v
	}
	return out, nil
}

func (o *ocStub) Connect(ctx context.Context, dir, name string) error {
	o.mu.Lock()
	o.calls = append(o.calls, stubCall{time.Now(), "connect", dir, name})
	d := o.delay[name]
	o.inFlight++
	o.mu.Unlock()
	defer func() { o.mu.Lock(); o.inFlight--; o.mu.Unlock() }()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if st, ok := o.after[name]; ok && o.status[dir] != nil {
		o.status[dir][name] = opencode.MCPServerStatus{Status: st}
	}
	return nil
}

func (o *ocStub) MCPConfig(ctx context.Context, dir string) (map[string]opencode.MCPEntry, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, stubCall{time.Now(), "config", dir, ""})
	out := map[string]opencode.MCPEntry{}
	for k, v := range o.config {
		out[k] = v
	}
	return out, nil
}

func (o *ocStub) connectTimes(dir, name string, since time.Time) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []time.Duration
	for _, c := range o.calls {
		if c.op == "connect" && c.dir == dir && c.name == name {
			out = append(out, c.at.Sub(since))
		}
	}
	return out
}

func (o *ocStub) count(op, dir string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.calls {
		if c.op == op && (dir == "" || c.dir == dir) {
			n++
		}
	}
	return n
}

// runEngine starts e until the returned stop is called.
func runEngine(e *Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	return func() { cancel(); <-done }
}

// connectsSince is when each connect of name in dir came, from since on.
func connectsSince(oc *ocStub, dir, name string, since time.Time) []time.Duration {
	var out []time.Duration
	for _, c := range oc.connectTimes(dir, name, since) {
		if c >= 0 {
			out = append(out, c)
		}
	}
	return out
}
