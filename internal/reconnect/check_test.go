package reconnect

import (
	"context"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"testing"
	"testing/synctest"
	"time"
)

// steadyOC answers every read with the same ten servers, nine connected
// and one disabled, without allocating: what the engine itself costs.
type steadyOC struct {
	status map[string]opencode.MCPServerStatus
	config map[string]opencode.MCPEntry
}

func newSteadyOC() *steadyOC {
	o := &steadyOC{status: map[string]opencode.MCPServerStatus{}, config: map[string]opencode.MCPEntry{}}
	for i := range 9 {
		name := fmt.Sprintf("s%d", i)
		o.status[name] = opencode.MCPServerStatus{Status: opencode.StatusConnected}
		o.config[name] = opencode.MCPEntry{Type: "local", Command: []string{"node", name + ".js"}}
	}
	o.status["off"] = opencode.MCPServerStatus{Status: opencode.StatusDisabled}
	o.config["off"] = opencode.MCPEntry{Type: "remote", URL: "http://127.0.0.1:1/mcp"}
	return o
}

func (o *steadyOC) MCPStatus(context.Context, string) (map[string]opencode.MCPServerStatus, error) {
	return o.status, nil
}
func (o *steadyOC) Connect(context.Context, string, string) error { return nil }
func (o *steadyOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	return o.config, nil
}

// An idle check of a directory whose ten servers are all as they should
// be (the check a thousand armed directories make every 30 s) costs a
// bounded handful of allocations: no per-server copy of a name, a status
// or a map, whatever the read holds.
func TestIdleCheckAllocatesLittle(t *testing.T) {
	e, ctx, d := idleChecked(t)
	allocs := testing.AllocsPerRun(200, func() { e.check(ctx, d) })
	t.Logf("%.1f allocations per idle check of ten servers", allocs)
	if allocs > maxIdleCheckAllocs {
		t.Errorf("%.0f allocations per idle check of ten servers, want at most %d", allocs, maxIdleCheckAllocs)
	}
}

// idleChecked is an engine over steadyOC and one directory in it, checked
// three times (the first learns the kinds): what an idle check then costs
// is the engine's own.
func idleChecked(tb testing.TB) (*Engine, context.Context, *dir) {
	tb.Helper()
	e, err := New(noJitter(), newSteadyOC(), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	d := newDir("/p", ArmedByFlag, time.Now(), cancel)
	e.mu.Lock()
	e.dirs[d.path] = d
	e.mu.Unlock()
	for range 3 {
		e.check(ctx, d)
	}
	return e, ctx, d
}

// maxIdleCheckAllocs: one today (the wait for OpenCode's answer), and a
// margin of one. Sorting the read's names into a fresh slice, as before,
// cost nine.
const maxIdleCheckAllocs = 2

// BenchmarkIdleCheck is the engine's own part of an idle check of ten
// servers (a read that changes nothing), without HTTP.
func BenchmarkIdleCheck(b *testing.B) {
	e, ctx, d := idleChecked(b)
	b.ReportAllocs()
	for b.Loop() {
		e.check(ctx, d)
	}
}

// slowConfigOC answers GET /config after a delay, during which the user
// disables the server (onConfig runs when the config request arrives).
type slowConfigOC struct {
	OpenCode
	delay    time.Duration
	onConfig func()
}

func (o *slowConfigOC) MCPConfig(ctx context.Context, dir string) (map[string]opencode.MCPEntry, error) {
	if o.onConfig != nil {
		o.onConfig()
	}
	select {
	case <-time.After(o.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return o.OpenCode.MCPConfig(ctx, dir)
}

// Rule 7 / rule 1. check decides its connects from the status read,
// then reads GET /config (learnKinds: whenever a failed or connected
// server's kind is unknown, i.e. at the first check of every directory and
// at every check after a config read failed) and only then connects. The
// config read can take up to the client's timeout (15 s; 2.x waits for the
// location's plugins first), so the connect goes out on a status read that
// old: a server the user disabled meanwhile is re-enabled by it (both
// generations' connect overrides disabled).
func TestConnectNotSentOnStatusOlderThanConfigRead(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {Status: "failed", Error: "Connection closed"}})
		rr := &rig{t: t, fake: fake}
		tr, stop := rr.serve()
		defer stop()
		client, _ := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Transport: tr, Password: fake.Secret()}})
		if _, _, err := client.Detect(context.Background()); err != nil {
			t.Fatal(err)
		}
		// A client uses the directory: its instance exists.
		if _, err := client.MCPStatus(context.Background(), dirA); err != nil {
			t.Fatal(err)
		}
		oc := &slowConfigOC{OpenCode: client, delay: 10 * time.Second}
		oc.onConfig = func() {
			// The user disables the server while the daemon reads the config.
			go fake.SetStatus(dirA, "s", "disabled", "")
		}
		eng, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = eng.Run(ctx) }()
		defer func() { cancel(); <-done }()
		if err := eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := fake.Count(routeConnect, dirA, "s"); n != 0 {
			t.Errorf("%d connect(s) for a server disabled 10 s before the connect was sent (decided on the read before the config read)", n)
		}
	})
}

// OpenCode 2 answering "not yet" (503 with retry-after: 1 while its
// service starts or stops, facts §6) is neither a failure of an MCP
// server nor news: every counter stays, no connect is sent, the next
// check waits at least the Retry-After (one backoff step longer each
// time it is still not ready), the engine does not look stuck, and once
// the service is ready the schedule goes on.
func TestNotYetKeepsCountersAndWaits(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(1500 * time.Millisecond) // the check at 1 s connected f: its next attempt is due at 2 s
		if s := r.server(dirA, "f"); s.Attempts != 1 {
			t.Fatalf("setup: f = %+v, want one attempt", s)
		}
		fake.SetService(fake2.ServiceStopping)
		r.at(30 * time.Second)
		if s := r.server(dirA, "f"); s.Attempts != 1 || s.Status != opencode.StatusFailed {
			t.Fatalf("while OpenCode said not yet: f = %+v; want its one attempt, still failed", s)
		}
		if got := r.connectTimes(dirA, "f"); len(got) != 1 {
			t.Fatalf("connects %v while OpenCode said not yet", got)
		}
		// Reads at about 2, 3, 5, 9 and 17 s (1 s doubling, jittered).
		if n := fake.Server.Count(fake2.RouteNotReady, "", ""); n < 4 || n > 6 {
			t.Fatalf("%d requests answered not yet in 28 s; want them spaced 1 s doubling", n)
		}
		if err := r.eng.Alive(time.Second); err != nil {
			t.Fatalf("waiting for OpenCode looks stuck: %v", err)
		}
		fake.SetService("")
		r.at(100 * time.Second)
		// The paced check after 30 s: its wait is the sixth or seventh
		// step (16 or 32 s, ±20 %), so at most about 70 s.
		if got := r.connectTimes(dirA, "f"); len(got) < 2 || got[1] < 30*time.Second || got[1] > 71*time.Second {
			t.Fatalf("connects once ready: %v; want the episode to go on at the next paced check", got)
		}
	})
}

// A connect OpenCode 2 answers "not yet" (it began to stop between the
// read and the connect: 503 with Retry-After: 7) reached no MCP server:
// the attempt is refunded (the episode does not advance) and the
// directory is not checked again before the Retry-After is over, even
// when an event asks sooner; then the episode goes on where it stood.
func TestNotYetAtConnectIsRefunded(t *testing.T) {
	each2x(t, func(t *testing.T, newFake2 func(map[string]Spec) *fakeV2) {
		fake := newFake2(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		r.stream()
		_ = r.eng.Arm(dirA, "test")
		r.at(1500 * time.Millisecond) // the first attempt, at 1 s, counted
		fake.NotYetConnects(1, 7*time.Second)
		r.at(2500 * time.Millisecond) // the second, at 2 s: not yet
		if s := r.server(dirA, "f"); s.Attempts != 1 || s.Tier != TierFast {
			t.Fatalf("after a connect answered not yet: f = %+v; want its one counted attempt", s)
		}
		reads := fake.Count(routeStatus, dirA, "")
		r.at(4 * time.Second)
		fake.ReportCrash(dirA, "f") // a wake for 5 s: not before the Retry-After
		r.at(8900 * time.Millisecond)
		if n := fake.Count(routeStatus, dirA, "") - reads; n != 0 {
			t.Fatalf("%d status reads within the Retry-After of a connect answered not yet", n)
		}
		if err := r.eng.Alive(time.Second); err != nil {
			t.Fatalf("waiting out OpenCode's Retry-After looks stuck: %v", err)
		}
		r.at(12 * time.Second)
		// 9 s: the second attempt again (the schedule's next after one
		// attempt is 2 s after it: 11 s).
		if got, want := r.connectTimes(dirA, "f"), secs(1, 9, 11); !equalDurations(got, want) {
			t.Fatalf("connects = %v, want %v", got, want)
		}
		if s := r.server(dirA, "f"); s.Attempts != 3 {
			t.Fatalf("f = %+v, want three counted attempts by 12 s", s)
		}
	})
}
