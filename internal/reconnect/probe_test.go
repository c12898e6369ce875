package reconnect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/probe"
)

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
