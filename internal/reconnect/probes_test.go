package reconnect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/probe"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A failed remote server's endpoint is probed at the pace of its own
// failure's age (every second in its first minute, every 1.5 s in its
// second: probe.Interval), whatever other directories using the same
// endpoint have seen: its recovery comes within about a second or two of
// the endpoint answering again. Here /a's server has failed (its
// endpoint down) for ten minutes, so probes for it have eased off to
// every 30 s; /b's server, on the same endpoint, failed about two
// minutes ago and is in the slow tier (its next scheduled attempt minutes
// away). When the endpoint answers, /b is connected within a few
// seconds, not when /a's eased-off probe happens to come.
func TestProbesOfANewlyFailedServerDoNotInheritAnotherDirectorysEasedOffPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ep := &endpoint{}
		oc := newStub()
		oc.config["r"] = opencode.MCPEntry{Type: "remote", URL: "http://r.test:9000/mcp"}
		oc.set("/a", "r", "failed")
		oc.set("/b", "r", "failed")
		cfg := noJitter()
		e, err := New(cfg, oc, Options{Budget: NewBudget(cfg.MaxConcurrent), URL: "http://oc", Prober: newTestProber(ep)})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		_ = e.Arm("/a", ArmedByFlag)
		time.Sleep(600 * time.Second)
		_ = e.Arm("/b", ArmedByFlag)
		time.Sleep(100 * time.Second) // /b: five fast attempts by 616 s, then the slow tier
		synctest.Wait()
		// The endpoint comes back right after a probe, whichever
		// directory's it was.
		for n := ep.dials.Load(); ep.dials.Load() == n; {
			time.Sleep(50 * time.Millisecond)
			synctest.Wait()
		}
		back := time.Now()
		ep.up.Store(true)
		before := len(oc.connectTimes("/b", "r", start))
		time.Sleep(40 * time.Second)
		synctest.Wait()
		got := oc.connectTimes("/b", "r", start)
		if len(got) <= before {
			t.Fatalf("/b's server was not connected within 40 s of its endpoint answering at %v (connects %v)", back.Sub(start), got)
		}
		if after := got[before] - back.Sub(start); after > 3*time.Second {
			t.Fatalf("/b's server, failed for %v, was connected %v after its endpoint answered again (want about a second): its probes run at /a's eased-off pace",
				back.Sub(start)-601*time.Second, after)
		}
	})
}

// A remote server the read no longer lists (removed from the config) is
// forgotten with everything that watches it: its endpoint is no longer
// probed, neither while its directory stays armed nor after it is
// disarmed.
func TestUnlistedFailedRemoteServerIsNoLongerProbed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{}
		oc := newStub()
		oc.config["r"] = opencode.MCPEntry{Type: "remote", URL: "http://r.test:9000/mcp"}
		oc.config["l"] = opencode.MCPEntry{Type: "local"}
		oc.set("/a", "r", "failed")
		oc.set("/a", "l", "connected")
		cfg := noJitter()
		e, err := New(cfg, oc, Options{Budget: NewBudget(cfg.MaxConcurrent), URL: "http://oc", Prober: newTestProber(ep)})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		_ = e.Arm("/a", ArmedByFlag)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if ep.dials.Load() == 0 {
			t.Fatal("the failed remote server's endpoint was never probed")
		}
		// The user removes r from the config: the next read no longer
		// lists it.
		oc.mu.Lock()
		delete(oc.status["/a"], "r")
		oc.mu.Unlock()
		if _, err := e.Reconnect("/a", nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for _, s := range e.Snapshot().Directories[0].Servers {
			if s.Name == "r" {
				t.Fatalf("r is still known after a read that does not list it: %+v", s)
			}
		}
		n := ep.dials.Load()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := ep.dials.Load() - n; got != 0 {
			t.Fatalf("the endpoint of r, which no read lists any more, was probed %d times in the 5 minutes after it was forgotten", got)
		}
		e.Disarm("/a", "test")
		n = ep.dials.Load()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := ep.dials.Load() - n; got != 0 {
			t.Fatalf("the endpoint of r was probed %d times in the 5 minutes after its directory was disarmed", got)
		}
	})
}

// endpoint is a fake remote endpoint for probes: up or down, counting dials.
type endpoint struct {
	up    atomic.Bool
	dials atomic.Int64
	mu    sync.Mutex
	conns []net.Conn
}

func (ep *endpoint) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	ep.dials.Add(1)
	if !ep.up.Load() {
		return nil, errors.New("connection refused")
	}
	a, b := net.Pipe()
	ep.mu.Lock()
	ep.conns = append(ep.conns, b)
	ep.mu.Unlock()
	return a, nil
}

func (ep *endpoint) close() {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for _, c := range ep.conns {
		c.Close()
	}
}

func probeRig(t *testing.T, g generation, ep *endpoint) (*rig, fakeOC) {
	return probeRigWith(t, g, ep, map[string]Spec{
		"r": {Status: "failed", Error: "SSE error: Unable to connect", Type: "remote", URL: "http://r.test:9000/mcp"},
		"l": {},
	}, Options{})
}

// probeRigWith is a rig whose engine probes through ep, with these servers
// in every directory.
func probeRigWith(t *testing.T, g generation, ep *endpoint, specs map[string]Spec, o Options) (*rig, fakeOC) {
	fake := g.new(specs)
	return newRigFlapping(t, fake, noJitter(), o, ep), fake
}

// newTestProber probes through ep.
func newTestProber(ep *endpoint) *probe.Prober {
	p := probe.New(20)
	p.Dial = ep.dial
	return p
}

// A remote server whose endpoint comes back is connected within about a
// second, outside its backoff (here in the slow tier, whose next attempt
// would be minutes away), as long as its last attempt is max-delay ago
// (rule 5: in the slow tier a probe buys one attempt per max-delay).
func TestProbeConnectsWhenEndpointReturns(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		ep := &endpoint{}
		r, fake := probeRig(t, g, ep)
		_ = r.eng.Arm(dirA, "test")
		r.at(60 * time.Second)
		if got := r.connectTimes(dirA, "r"); len(got) != 5 {
			t.Fatalf("fast episode connects = %v", got)
		}
		// About one probe a second since the first check; bounded.
		if n := ep.dials.Load(); n < 55 || n > 60 {
			t.Fatalf("probes in 60 s = %d, want about one a second", n)
		}
		ep.up.Store(true)
		fake.SetAfterConnect(dirA, "r", "connected")
		r.at(61*time.Second + 10*time.Millisecond)
		got := r.connectTimes(dirA, "r")
		if len(got) != 6 || got[5] > 61*time.Second {
			t.Fatalf("connects = %v, want a sixth within 1 s of the endpoint returning", got)
		}
		r.at(65 * time.Second)
		if s := r.server(dirA, "r"); s.Status != "connected" {
			t.Fatalf("status = %+v", s)
		}
		dials := ep.dials.Load()
		r.at(5 * time.Minute)
		if ep.dials.Load() != dials {
			t.Fatal("a connected server is still probed")
		}
	})
}

// An endpoint that returns less than max-delay after the last slow-tier
// attempt waits until max-delay after it, not for the slow interval.
func TestProbeInSlowTierWaitsForMaxDelay(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		ep := &endpoint{}
		r, _ := probeRig(t, g, ep)
		_ = r.eng.Arm(dirA, "test")
		r.at(20 * time.Second) // last fast attempt at 16 s
		ep.up.Store(true)
		r.at(60 * time.Second)
		got := r.connectTimes(dirA, "r")
		if len(got) != 6 || got[5] != 46*time.Second {
			t.Fatalf("connects = %v, want a sixth at 46s (max-delay after the last)", got)
		}
	})
}

// An endpoint that answers while the server stays failed (say, it needs
// credentials) causes one probe-triggered connect, not one per probe.
func TestProbeDoesNotHammerAReachableButBrokenServer(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		ep := &endpoint{}
		r, _ := probeRig(t, g, ep)
		_ = r.eng.Arm(dirA, "test")
		r.at(20 * time.Second)
		ep.up.Store(true)
		r.at(4 * time.Minute)
		if got := r.connectTimes(dirA, "r"); len(got) != 6 {
			t.Fatalf("connects = %v, want the 5 fast ones and one on reachability", got)
		}
		// Probes ease off while it stays failed.
		dials := ep.dials.Load()
		r.at(5 * time.Minute)
		if n := ep.dials.Load() - dials; n > 60 {
			t.Fatalf("%d probes in the 5th minute", n)
		}
	})
}

// Local servers are never probed, even when their config entry names a
// URL (a stray key, or one left from when the server was remote): only a
// remote server's endpoint says anything about whether it can connect.
// The remote server beside it is probed, through the same endpoint.
func TestProbeOnlyRemote(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		ep := &endpoint{}
		if noConfigRoute(g.new(nil)) {
			t.Skip("no config route to give a local server a URL in (the config files are internal/opencode's TestConfigFilesOfAnOpenCode2SharingOurFiles)")
		}
		fake := &localURLs{fakeOC: g.new(map[string]Spec{"l": {Status: "failed"}}), url: "http://l.test:9000/mcp"}
		r := newRigFlapping(t, fake, noJitter(), Options{}, ep)
		_ = r.eng.Arm(dirA, "test")
		r.at(time.Minute)
		if n := ep.dials.Load(); n != 0 {
			t.Fatalf("%d probes of a local server", n)
		}
		if fake.served.Load() == 0 {
			t.Fatal("the config that names a URL for the local server was never read")
		}
		fake.AddServer(dirA, "r", Spec{Status: "failed", Type: "remote", URL: "http://r.test:9000/mcp"})
		r.at(2 * time.Minute)
		if ep.dials.Load() == 0 {
			t.Fatal("the remote server was never probed: the test cannot see a probe")
		}
	})
}

// localURLs gives every local server's config entry a url, in either
// generation's GET /config answer.
type localURLs struct {
	fakeOC
	url    string
	served atomic.Int64
}

func (f *localURLs) ServeHTTP(w http.ResponseWriter, q *http.Request) {
	if q.URL.Path != "/config" && q.URL.Path != "/api/config" {
		f.fakeOC.ServeHTTP(w, q)
		return
	}
	rec := httptest.NewRecorder()
	f.fakeOC.ServeHTTP(rec, q)
	var body any
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "local" {
				v["url"] = f.url
				f.served.Add(1)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(body)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// A remote server that restarts behind OpenCode's back (OpenCode still
// says connected) gets a fresh session: its endpoint went away and came
// back, so it is connected again. An idle connection the server merely
// closes is not a restart.
func TestStaleSessionRepairedAfterRestart(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		ep := &endpoint{}
		ep.up.Store(true)
		r, fake := probeRigWith(t, g, ep, map[string]Spec{
			"r":   {Status: "connected", Type: "remote", URL: "http://r.test:9000/mcp", AfterConnect: "connected"},
			"off": {Status: "disabled", Type: "remote", URL: "http://off.test:9000/mcp"},
		}, Options{})
		_ = r.eng.Arm(dirA, "test")
		r.at(3 * time.Second)
		if n := ep.dials.Load(); n != 1 {
			t.Fatalf("dials after the first check = %d, want 1 held connection", n)
		}
		// The server closes an idle connection but keeps accepting: no repair.
		ep.close()
		r.at(4 * time.Second)
		if got := r.connectTimes(dirA, "r"); len(got) != 0 {
			t.Fatalf("an idle close caused connects %v", got)
		}
		// The server restarts: connections drop, new ones are refused for 3 s.
		ep.up.Store(false)
		ep.close()
		r.at(8 * time.Second)
		ep.up.Store(true)
		r.at(9*time.Second + 10*time.Millisecond)
		got := r.connectTimes(dirA, "r")
		if len(got) != 1 || got[0] < 8*time.Second {
			t.Fatalf("connects = %v, want one within a second of the endpoint returning at 8 s", got)
		}
		r.at(12 * time.Second)
		if n := len(r.eventsOf(EventReconnected)); n != 1 {
			t.Fatalf("reconnected events = %d, want 1", n)
		}
		if n := fake.Count(routeConnect, "", "off"); n != 0 {
			t.Fatalf("the disabled server got %d connects", n)
		}
		if s := r.server(dirA, "off"); s.Status != "disabled" {
			t.Fatalf("disabled server is now %q", s.Status)
		}
	})
}

// However many directories use one remote server, its endpoint is watched
// over one held connection, and a restart repairs it in every directory.
func TestEndpointWatchIsSharedAcrossDirectories(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		ep := &endpoint{}
		ep.up.Store(true)
		r, _ := probeRigWith(t, g, ep, map[string]Spec{
			"r": {Status: "connected", Type: "remote", URL: "http://r.test:9000/mcp", AfterConnect: "connected"},
		}, Options{})
		dirs := []string{"/a", "/b", "/c"}
		for _, d := range dirs {
			_ = r.eng.Arm(d, "test")
		}
		r.at(3 * time.Second)
		if n := ep.dials.Load(); n != 1 {
			t.Fatalf("dials = %d, want one held connection for three directories", n)
		}
		ep.up.Store(false)
		ep.close()
		r.at(5 * time.Second)
		ep.up.Store(true)
		// Remote connects share the budget's remote slot: the three repairs
		// follow each other within a few slot waits.
		r.at(8 * time.Second)
		for _, d := range dirs {
			if got := r.connectTimes(d, "r"); len(got) != 1 || got[0] > 7*time.Second {
				t.Errorf("%s: connects = %v, want one repair soon after 5 s", d, got)
			}
		}
	})
}

// Directories sharing a failed remote server share its probes: ten
// directories do not dial ten times a second.
func TestProbesAreSharedAcrossDirectories(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		ep := &endpoint{}
		r, _ := probeRigWith(t, g, ep, map[string]Spec{
			"r": {Status: "failed", Type: "remote", URL: "http://r.test:9000/mcp"},
		}, Options{Budget: NewBudget(100)})
		for i := range 10 {
			_ = r.eng.Arm(fmt.Sprintf("/p/%d", i), "test")
		}
		r.at(21 * time.Second)
		// Probes start after each directory's first check (1 s): about one
		// dial a second for the endpoint, not ten.
		if n := ep.dials.Load(); n < 15 || n > 45 {
			t.Fatalf("dials in 20 s for one endpoint used by 10 directories = %d, want about 20-40", n)
		}
	})
}

// A failed remote server's endpoint is probed (about once a second)
// without a check slot, while every slot is taken and other directories
// wait for one. Here /probe's
// connect of r is in flight (60 s), so its next check is the idle one;
// from 2.5 s, 33 directories are due and the slow OpenCode (10 s a read)
// holds all 32 slots until 12.5 s: /probe's endpoint is probed about once
// a second all along.
func TestProbesRunWhileEveryCheckSlotIsTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{}
		oc := &prefixSlowOC{ocStub: newStub(), slow: "/hot/", delay: 10 * time.Second}
		oc.config["r"] = opencode.MCPEntry{Type: "remote", URL: "http://r.test:9000/mcp"}
		oc.ocStub.delay["r"] = time.Minute
		oc.set("/probe", "r", "failed")
		e, err := New(noJitter(), oc, Options{Prober: newTestProber(ep)})
		if err != nil {
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		synctest.Wait()
		start := time.Now()
		if err := e.Arm("/probe", ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		for i := range maxChecks + 1 {
			d := fmt.Sprintf("/hot/%02d", i)
			oc.set(d, "s", "connected")
			if err := e.Arm(d, ArmedByFlag); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3*time.Second - time.Since(start))
		before := ep.dials.Load()
		time.Sleep(12*time.Second - time.Since(start))
		if n := ep.dials.Load() - before; n < 5 {
			t.Fatalf("/probe's failed remote endpoint was probed %d times between 3 s and 12 s (every check slot taken, a directory due for a check waiting), want about once a second", n)
		}
	})
}
