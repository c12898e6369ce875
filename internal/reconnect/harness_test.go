package reconnect

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"go.uber.org/goleak"
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
