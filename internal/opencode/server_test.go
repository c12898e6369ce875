package opencode_test

import (
	"context"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// newHosts serves fakes by host name until the test ends.
func newHosts(t *testing.T) *fakeopencode.Hosts {
	h := fakeopencode.NewHosts()
	t.Cleanup(h.Close)
	return h
}

const hostA = "opencode.a:4096"

// A Server finds out which generation it talks to and offers the same
// calls for both.
func TestServerDetectsEitherGeneration(t *testing.T) {
	for _, gen := range []opencode.Generation{opencode.V1, opencode.V2} {
		t.Run(gen.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHosts(t)
				specs := map[string]fakeopencode.Spec{"f": {Status: "failed", Error: "boom"}, "ok": {}}
				pw := ""
				if gen == opencode.V1 {
					h.Serve(hostA, fakeopencode.New(specs))
				} else {
					h.Serve(hostA, fake2.New(specs))
					pw = fake2.DefaultPassword
				}
				s, err := opencode.NewServer(opencode.ServerOptions{URL: "http://" + hostA, Client: opencode.Options{Password: pw, Transport: h.Transport()}})
				if err != nil {
					t.Fatal(err)
				}
				st, err := s.MCPStatus(context.Background(), "/p/x y")
				if err != nil {
					t.Fatal(err)
				}
				if st["f"].Status != "failed" || st["ok"].Status != "connected" {
					t.Fatalf("status = %+v", st)
				}
				if g, _ := s.Generation(); g != gen {
					t.Fatalf("generation = %v, want %v", g, gen)
				}
				err = s.ShowToast(context.Background(), opencode.Toast{Message: "m", Variant: "info"})
				if gen == opencode.V2 && !errors.Is(err, opencode.ErrNoToast) {
					t.Fatalf("toast on 2.x = %v, want ErrNoToast", err)
				}
				if gen == opencode.V1 && err != nil {
					t.Fatalf("toast on 1.x = %v", err)
				}
			})
		})
	}
}

// streamRecorder collects what a Server's stream reports, and what the
// Server tells its watchers (the owner of "OpenCode restarted").
type streamRecorder struct {
	mu       sync.Mutex
	connects []opencode.Connected
	events   []opencode.Event
	// told is the Server's changes and the stream's subscribes, in
	// order: "gone", "replaced", "connect".
	told []string
}

// run registers the recorder as a watcher of s and follows its stream
// (call it before any request of s).
func (r *streamRecorder) run(t *testing.T, s *opencode.Server) {
	s.OnChange(func(ch opencode.Change, _ error) {
		r.mu.Lock()
		r.told = append(r.told, ch.String())
		r.mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Stream(ctx, opencode.StreamOptions{OnConnect: func(c opencode.Connected) {
			r.mu.Lock()
			r.connects = append(r.connects, c)
			r.told = append(r.told, "connect")
			r.mu.Unlock()
		}}, func(ev opencode.Event) {
			if ev.Kind == opencode.KindOther {
				return
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func (r *streamRecorder) snapshot() ([]opencode.Connected, []opencode.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]opencode.Connected(nil), r.connects...), append([]opencode.Event(nil), r.events...)
}

// timeline is what the Server told and the stream did, in order.
func (r *streamRecorder) timeline() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.told, " ")
}

// An OpenCode 1.x replaced by a 2.x on the same port under a running
// stream is followed: the stream comes back on 2.x's event route, the
// Server says the process is gone and then new before it does, and 2.x
// events arrive as the same kinds.
func TestServerFollowsAnUpgradeToV2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHosts(t)
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"f": {}})
		v1.SetHeartbeat(10 * time.Second)
		h.Serve(hostA, v1)
		s, _ := opencode.NewServer(opencode.ServerOptions{URL: "http://" + hostA, Client: opencode.Options{Password: fake2.DefaultPassword, Transport: h.Transport()}})
		var rec streamRecorder
		rec.run(t, s)
		time.Sleep(time.Second)
		v1.Publish("/p", "mcp.tools.changed", map[string]any{"server": "f"})
		time.Sleep(time.Second)

		h.Stop(hostA) // the upgrade: nothing listens for a while
		time.Sleep(3 * time.Second)
		v2 := fake2.New(map[string]fakeopencode.Spec{"f": {}})
		h.Serve(hostA, v2)
		time.Sleep(40 * time.Second) // the stream's backoff
		v2.Publish("/p", "location.shutdown", map[string]any{})
		time.Sleep(time.Second)
		synctest.Wait()

		connects, events := rec.snapshot()
		if len(connects) != 2 {
			t.Fatalf("connects = %+v, want 2", connects)
		}
		if c := connects[1]; c.Generation != opencode.V2 {
			t.Fatalf("second connect = %+v, want 2.x", c)
		}
		if got, want := rec.timeline(), "connect gone replaced connect"; got != want {
			t.Fatalf("told %q, want %q: the upgrade is a restart, told before the re-subscribe", got, want)
		}
		if g, _ := s.Generation(); g != opencode.V2 {
			t.Fatalf("generation after the upgrade = %v", g)
		}
		want := []opencode.Kind{opencode.KindServerFailed, opencode.KindInstanceGone}
		if len(events) != 2 || events[0].Kind != want[0] || events[1].Kind != want[1] || events[1].Directory != "/p" {
			t.Fatalf("events = %+v, want a 1.x crash then a 2.x location.shutdown for /p", events)
		}
		if n := v2.Count(fake2.RouteEvent, "", ""); n != 1 {
			t.Fatalf("2.x event subscriptions = %d, want 1", n)
		}
	})
}

// A 2.x service that restarts on another port with another password is
// followed through Discover (the service file), and the Server says it
// was replaced before the stream subscribes to it.
func TestServerFollowsServiceToNewPortAndPassword(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHosts(t)
		first := fake2.New(map[string]fakeopencode.Spec{"f": {}})
		h.Serve("svc.a:49374", first)
		var mu sync.Mutex
		url, pw := "http://svc.a:49374", fake2.DefaultPassword
		s, _ := opencode.NewServer(opencode.ServerOptions{
			Client: opencode.Options{Transport: h.Transport()},
			Discover: func(context.Context) (string, string, error) {
				mu.Lock()
				defer mu.Unlock()
				return url, pw, nil
			},
		})
		var rec streamRecorder
		rec.run(t, s)
		time.Sleep(2 * time.Second)

		h.Stop("svc.a:49374")
		second := fake2.New(map[string]fakeopencode.Spec{"g": {Status: "failed"}})
		second.SetPassword("new-password")
		second.SetPID(777)
		h.Serve("svc.b:50000", second)
		mu.Lock()
		url, pw = "http://svc.b:50000", "new-password"
		mu.Unlock()
		time.Sleep(40 * time.Second)
		synctest.Wait()

		connects, _ := rec.snapshot()
		if len(connects) != 2 {
			t.Fatalf("connects = %+v, want a second", connects)
		}
		// Whether the old port's refusal came before the service file
		// named the new one decides whether "gone" was told first.
		if got := rec.timeline(); !strings.HasPrefix(got, "connect ") || !strings.HasSuffix(got, " replaced connect") || strings.Count(got, "replaced") != 1 {
			t.Fatalf("told %q, want one \"replaced\" right before the second connect", got)
		}
		st, err := s.MCPStatus(context.Background(), "/p")
		if err != nil || st["g"].Status != "failed" {
			t.Fatalf("status through the moved service = %+v, %v", st, err)
		}
		if s.URL() != "http://svc.b:50000" {
			t.Fatalf("URL = %q", s.URL())
		}
	})
}

// A subscription whose first event never comes (a request that reached
// OpenCode in its first half second can hang) is given up after the
// handshake timeout, not after three heartbeat periods.
func TestStreamHandshakeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHosts(t)
		var mu sync.Mutex
		hang := true
		fake := fakeopencode.New(nil)
		fake.SetHeartbeat(10 * time.Second)
		h.Serve(hostA, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hung := hang
			mu.Unlock()
			if hung && r.URL.Path == "/global/event" {
				<-r.Context().Done()
				return
			}
			fake.ServeHTTP(w, r)
		}))
		c, _ := opencode.NewServer(opencode.ServerOptions{URL: "http://" + hostA, Client: opencode.Options{Transport: h.Transport()}})
		var drops []error
		var connected time.Time
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.Stream(ctx, opencode.StreamOptions{
				OnDrop:    func(err error) { mu.Lock(); drops = append(drops, err); hang = false; mu.Unlock() },
				OnConnect: func(opencode.Connected) { connected = time.Now() },
			}, func(opencode.Event) {})
		}()
		time.Sleep(10 * time.Second)
		cancel()
		<-done
		if len(drops) == 0 || connected.IsZero() || connected.Sub(start) > 7*time.Second {
			t.Fatalf("drops %v, connected after %v: want a drop after the 5 s handshake and a connect soon after", drops, connected.Sub(start))
		}
	})
}

const changeHost = "127.0.0.1:4096"

// changes records what a Server tells its watchers, with the (fake) time.
type changes struct {
	mu  sync.Mutex
	got []opencode.Change
	at  []time.Time
}

func (c *changes) add(ch opencode.Change, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, ch)
	c.at = append(c.at, time.Now())
}

func (c *changes) list() []opencode.Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]opencode.Change(nil), c.got...)
}

func newWatchedServer(t *testing.T, hosts *fakeopencode.Hosts, password string) (*opencode.Server, *changes) {
	t.Helper()
	s, err := opencode.NewServer(opencode.ServerOptions{URL: "http://" + changeHost,
		Client: opencode.Options{Password: password, Transport: hosts.Transport()}})
	if err != nil {
		t.Fatal(err)
	}
	c := &changes{}
	s.OnChange(c.add)
	return s, c
}

// A refused request makes the server Gone once, whoever made it, and the
// next answer makes it Replaced: rule 8's news reaches every watcher from
// whichever path saw it first.
func TestServerToldGoneOnceAndReplacedOnNextAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		hosts.Serve(changeHost, fakeopencode.New(map[string]fakeopencode.Spec{"s": {}}))
		s, c := newWatchedServer(t, hosts, "")
		ctx := context.Background()
		if _, err := s.MCPStatus(ctx, "/p"); err != nil {
			t.Fatal(err)
		}
		if got := c.list(); len(got) != 0 {
			t.Fatalf("changes before any refusal: %v", got)
		}
		hosts.Stop(changeHost)
		_, _ = s.MCPStatus(ctx, "/p") // a status read is refused
		_ = s.Connect(ctx, "/p", "s") // so is a connect
		_, _ = s.MCPConfig(ctx, "/p") // and a config read
		if got := c.list(); len(got) != 1 || got[0] != opencode.Gone {
			t.Fatalf("changes after three refused requests = %v, want [gone] once", got)
		}
		hosts.Serve(changeHost, fakeopencode.New(map[string]fakeopencode.Spec{"s": {}}))
		if err := s.Connect(ctx, "/p", "s"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MCPStatus(ctx, "/p"); err != nil {
			t.Fatal(err)
		}
		if got := c.list(); len(got) != 2 || got[1] != opencode.Replaced {
			t.Fatalf("changes after OpenCode answered again = %v, want [gone replaced]", got)
		}
	})
}

// A 2.x service replaced within one backoff step is refused by nobody:
// its new pid, seen by the next detection, makes it Replaced.
func TestServerReplacedWhenThePidChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		old := fake2.New(map[string]fakeopencode.Spec{"s": {}})
		hosts.Serve(changeHost, old)
		s, c := newWatchedServer(t, hosts, fake2.DefaultPassword)
		ctx := context.Background()
		if _, _, err := s.Detect(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Detect(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.list(); len(got) != 0 {
			t.Fatalf("changes while the same process answers: %v", got)
		}
		fresh := fake2.New(map[string]fakeopencode.Spec{"s": {}})
		fresh.PID = old.PID + 1
		hosts.Serve(changeHost, fresh)
		if _, _, err := s.Detect(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.list(); len(got) != 1 || got[0] != opencode.Replaced {
			t.Fatalf("changes after the pid changed = %v, want [replaced]", got)
		}
	})
}

// When the event stream ends because OpenCode died, the watchers learn it
// at once, not a backoff step (up to 30 s) later when the stream tries
// again: a directory checked in between would read the next process.
func TestStreamDropToldAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		fake := fakeopencode.New(map[string]fakeopencode.Spec{"s": {}})
		fake.SetHeartbeat(10 * time.Second)
		hosts.Serve(changeHost, fake)
		s, c := newWatchedServer(t, hosts, "")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		up := make(chan struct{}, 8)
		go func() {
			defer close(done)
			_ = s.Stream(ctx, opencode.StreamOptions{OnConnect: func(opencode.Connected) { up <- struct{}{} }}, func(opencode.Event) {})
		}()
		<-up
		time.Sleep(time.Minute) // a stable stream: the next backoff step is 0.5 s, the one after grows
		stopped := time.Now()
		hosts.Stop(changeHost)
		synctest.Wait()
		c.mu.Lock()
		got, at := append([]opencode.Change(nil), c.got...), append([]time.Time(nil), c.at...)
		c.mu.Unlock()
		cancel()
		<-done
		if len(got) != 1 || got[0] != opencode.Gone || at[0].Sub(stopped) > 0 {
			t.Fatalf("changes after OpenCode stopped = %v at %v (stopped at %v), want [gone] at once", got, at, stopped)
		}
	})
}

// The pacing of "not yet" belongs to one stretch of a service starting
// (or stopping): once OpenCode is gone (nothing listens) the process that
// comes back is another, and its first "not yet" waits one step again,
// not the step the old one had reached.
func TestNotYetPacingStartsAfreshAfterOpenCodeWasGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const host = "opencode.gone:4096"
		hosts := fakeopencode.NewHosts()
		t.Cleanup(hosts.Close)
		hosts.Serve(host, notReady("service_stopping", "1"))
		s, err := opencode.NewServer(opencode.ServerOptions{URL: "http://" + host, Client: opencode.Options{Password: "pw", Transport: hosts.Transport()}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var wait time.Duration
		for range 5 {
			_, _, err := s.Detect(ctx)
			var ok bool
			if wait, ok = opencode.RetryAfter(err); !ok {
				t.Fatalf("detect: %v; want not yet", err)
			}
			time.Sleep(wait)
		}
		if wait < 10*time.Second {
			t.Fatalf("setup: the fifth wait is %v; want the pacing grown to about 16 s", wait)
		}
		hosts.Stop(host)
		if _, _, err := s.Detect(ctx); !errors.Is(err, opencode.ErrRefused) {
			t.Fatalf("with nothing listening: %v; want refused", err)
		}
		hosts.Serve(host, notReady("service_starting", "1"))
		_, _, err = s.Detect(ctx)
		if wait, ok := opencode.RetryAfter(err); !ok || wait > 1200*time.Millisecond {
			t.Fatalf("the first not yet after OpenCode was gone: %v (wait %v); want about a second", err, wait)
		}
	})
}

// Rule 8: OpenCode restarts are not stream hiccups.
// The stream re-detects the server (and so sees a new pid) only after an
// attempt that reached nobody. A 2.x service that restarts on the same port
// faster than the stream's first re-subscribe (about 0.5 s; a service
// manager restarting it, `opencode service restart`, an upgrade that
// replaces it) is never refused, never re-detected, and the new process
// is reported as the old one: the Server tells no watcher, the daemon
// re-reads every armed directory, and each read boots a location in the
// new process (its whole MCP fleet) that nobody may use any more. 2.x
// reports its pid in /api/info, so this restart can be told: the Server's
// OnChange says Replaced (never Gone: nothing refused) before the stream
// subscribes to the new process.
func TestFastRestartOfV2ServiceIsARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHosts(t)
		first := fake2.New(map[string]fakeopencode.Spec{"f": {}})
		h.Serve(hostA, first)
		s, _ := opencode.NewServer(opencode.ServerOptions{URL: "http://" + hostA, Client: opencode.Options{Password: fake2.DefaultPassword, Transport: h.Transport()}})
		var rec streamRecorder
		rec.run(t, s)
		time.Sleep(time.Second)
		first.Publish("/p", "session.created", map[string]any{}) // the stream delivers events for a while
		time.Sleep(time.Second)

		// The service restarts: a new process (new pid) on the same port,
		// up again before the stream's first retry.
		second := fake2.New(map[string]fakeopencode.Spec{"f": {}})
		second.SetPID(fake2.DefaultPID + 1)
		h.Serve(hostA, second)
		time.Sleep(10 * time.Second)
		synctest.Wait()

		connects, _ := rec.snapshot()
		if len(connects) != 2 {
			t.Fatalf("connects = %+v, want 2", connects)
		}
		if got, want := rec.timeline(), "connect replaced connect"; got != want {
			t.Errorf("re-subscribe to a new 2.x process (pid %d, was %d): told %q, want %q", fake2.DefaultPID+1, fake2.DefaultPID, got, want)
		}
	})
}
