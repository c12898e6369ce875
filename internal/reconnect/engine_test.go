package reconnect

import (
	"context"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"testing"
	"testing/synctest"
	"time"
)

// --directory arms directories "from the start" (SPEC, flags), but
// a `watch --directory D` started before OpenCode (a service manager
// starting both, a login script) loses D for good: its first check, one
// initial-delay after start, is refused, opencodeGone forgets every
// directory, and nothing arms a --directory again. When OpenCode comes up,
// D's failed servers are never retried unless a client happens to use D.
// (The same happens to every --directory at each OpenCode restart.) The
// refused-means-forget rule exists so the daemon does not re-create
// instances nobody uses; a directory the user named is one they use.
func TestDirectoryFlagSurvivesOpenCodeNotYetUp(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"broken": {Status: "failed", Error: "Connection closed"}})
		rr := &rig{t: t, fake: fake}
		tr, stop := rr.serve()
		defer stop()
		client, _ := opencode.NewServer(opencode.ServerOptions{URL: fakeopencode.URL, Client: opencode.Options{Transport: tr, Password: fake.Secret()}})
		oc := &refusingOC{OpenCode: client}
		oc.refuse.Store(true) // OpenCode is not running yet
		eng, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		oc.gone = eng.OpenCodeGone
		if err := eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = eng.Run(ctx) }()
		defer func() { cancel(); <-done }()
		time.Sleep(3 * time.Second)
		oc.refuse.Store(false) // OpenCode is up
		if _, _, err := client.Detect(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := fake.Count(routeConnect, dirA, "broken"); n == 0 {
			t.Errorf("no connect for %s, armed by --directory, after OpenCode came up (armed directories now: %d)", dirA, len(eng.Snapshot().Directories))
		}
	})
}

// POST /reconnect with keep (run's --directory handed to the OpenCode 2
// service's daemon) arms the directory as the user's own, "as if given
// with --directory at its start: armed through OpenCode's restarts"
// (statusapi.ReconnectRequest.Keep). The directory run names is usually
// in use already -- the TUI the user just started there, or another one,
// armed it by its session activity. Naming it must make it the user's
// all the same: were it left armed by the event, the service's next
// restart would forget it like any directory nobody named, status would
// never show it as the user's, and only activity in it would arm it
// again.
func TestNamingADirectoryArmedByActivityKeepsItThroughARestart(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, "session.updated"); err != nil { // a client is using it
			t.Fatal(err)
		}
		r.at(5 * time.Second)
		if err := r.eng.Arm(dirA, ArmedByFlag); err != nil { // keep
			t.Fatal(err)
		}
		r.eng.OpenCodeReplaced() // the service restarts
		r.at(10 * time.Second)
		var armedBy []string
		for _, d := range r.eng.Snapshot().Directories {
			if d.Directory == dirA {
				armedBy = append(armedBy, d.ArmedBy)
			}
		}
		if len(armedBy) != 1 || armedBy[0] != ArmedByFlag {
			t.Errorf("a directory kept by run (reconnect keep) while a client had it armed: after OpenCode restarted it is armed by %q, want kept as %q", armedBy, ArmedByFlag)
		}
	})
}

// A directory the user named stays the user's whatever arms it again
// after a disposal, the user's reconnect too: status shows it as named,
// and an OpenCode restart keeps it armed.
func TestNamedDirectoryReArmedByReconnectStaysTheUsers(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"s": {}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		r.at(5 * time.Second)
		r.eng.HandleEvent(opencode.Event{Kind: opencode.KindAllGone, Type: "global.disposed"})
		if _, err := r.eng.Reconnect(dirA, nil); err != nil {
			t.Fatal(err)
		}
		r.at(10 * time.Second)
		r.eng.OpenCodeReplaced()
		r.at(15 * time.Second)
		var armedBy []string
		for _, d := range r.eng.Snapshot().Directories {
			armedBy = append(armedBy, d.ArmedBy)
		}
		if len(armedBy) != 1 || armedBy[0] != ArmedByFlag {
			t.Errorf("a named directory armed again by reconnect after a disposal: after OpenCode restarted, armed by %q, want kept as %q", armedBy, ArmedByFlag)
		}
	})
}

// A reconnect that arrives before the engine runs (the status API serves
// while the daemon detects OpenCode) keeps a --directory directory's
// standing: it stays armed through OpenCode restarts, not demoted to an
// ordinary armed directory forgotten at the next restart.
func TestReconnectBeforeRunKeepsDirectoryFlag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Arm("/p", ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reconnect("/p", nil); err != nil { // the status API, during detection
			t.Fatal(err)
		}
		stop := runEngine(e)
		defer stop()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		e.OpenCodeReplaced() // OpenCode restarted
		time.Sleep(2 * time.Second)
		synctest.Wait()
		snap := e.Snapshot()
		if len(snap.Directories) != 1 || snap.Directories[0].ArmedBy != ArmedByFlag {
			t.Fatalf("after an OpenCode restart the --directory is %+v, want it armed by %s", snap.Directories, ArmedByFlag)
		}
	})
}

// A --directory directory disposed by OpenCode and armed again by a
// client's activity is still the user's: the next OpenCode restart keeps
// it.
func TestDirectoryFlagKeepsStandingAfterADisposal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "s", "connected")
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(2 * time.Second)
		e.HandleEvent(opencode.Event{Kind: opencode.KindInstanceGone, Type: "server.instance.disposed", Directory: "/p"})
		time.Sleep(time.Minute)
		e.HandleEvent(opencode.Event{Kind: opencode.KindActivity, Type: "session.updated", Directory: "/p"})
		time.Sleep(2 * time.Second)
		e.OpenCodeReplaced()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		snap := e.Snapshot()
		if len(snap.Directories) != 1 || snap.Directories[0].ArmedBy != ArmedByFlag {
			t.Fatalf("after a disposal, activity and an OpenCode restart the --directory is %+v, want it armed by %s", snap.Directories, ArmedByFlag)
		}
	})
}

// A --directory directory survives an OpenCode restart, but not with
// everything it knew about the old process: its servers' episodes
// (attempt counters, slow tier) and its config (kinds and endpoint URLs)
// start afresh. The new OpenCode is a new process with fresh MCP
// connections, often restarted because the config changed. A server that
// was in the slow tier before the restart and is failed in the new
// process (the very case the tool exists for: a server not up when
// OpenCode started) must not wait for the old slow-tier slot (minutes)
// instead of the fast episode (1, 2, 4, 8, 16 s) a directory armed afresh gets.
func TestDirectoryFlagStartsAfreshAfterOpenCodeRestart(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"late": {Status: "failed", Error: "Connection closed"}})
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, ArmedByFlag); err != nil {
			t.Fatal(err)
		}
		r.at(60 * time.Second) // fast episode spent: slow tier
		before := fake.Count(routeConnect, dirA, "late")
		// OpenCode restarts (the stream comes back from a new process); the
		// server is failed in the new process too, and comes up 3 s later.
		r.eng.OpenCodeReplaced()
		fake.SetAfterConnect(dirA, "late", "connected")
		r.at(60*time.Second + 30*time.Second)
		if n := fake.Count(routeConnect, dirA, "late") - before; n == 0 {
			t.Fatalf("no connect of a failed server in the 30 s after OpenCode restarted: the --directory directory kept its old slow-tier counter (%+v)", r.server(dirA, "late"))
		}
	})
}

// The tests of a network change. Any change (InterfacesChanged) retries
// failed servers; one that moved the way out, or a wake from sleep
// (NetworkChanged), also connects connected remote servers again for a
// fresh session, since a VPN that resets every live socket leaves
// OpenCode holding a dead session that it still calls connected. Every
// attempt is charged to the server's episode.

// connectsIn returns the connects of name in dir received in [from, to).
func (r *rig) connectsIn(dir, name string, from, to time.Duration) []time.Duration {
	var out []time.Duration
	for _, c := range r.connectTimes(dir, name) {
		if c >= from && c < to {
			out = append(out, c)
		}
	}
	return out
}

// A network change connects every connected remote server again,
// initial-delay later (after the repairs of failed servers the change
// asks for), and leaves alone the connected local server and the remote
// servers left to the user (disabled, needs_auth). A second change within
// max-delay of the renewal is not dropped (the renewal may have been made
// on the network before it) but waits: one more renewal, max-delay after
// the first, and nothing after that.
func TestNetworkChangeRenewsConnectedRemoteSessions(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{
			"rem":  {Type: "remote", URL: "http://rem.test:9000/mcp"},
			"loc":  {},
			"off":  {Status: "disabled", Type: "remote", URL: "http://off.test:9000/mcp"},
			"auth": {Status: "needs_auth", Type: "remote", URL: "http://auth.test:9000/mcp"},
		})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(time.Minute)
		if n := fake.Count(routeConnect, "", ""); n != 0 {
			t.Fatalf("setup: %d connects before the change", n)
		}
		r.eng.NetworkChanged()
		r.at(time.Minute + time.Second + 100*time.Millisecond)
		if got := r.connectTimes(dirA, "rem"); len(got) != 1 || got[0] != time.Minute+time.Second {
			t.Fatalf("remote connects = %v, want one initial-delay after the change (61 s)", got)
		}
		for _, name := range []string{"loc", "off", "auth"} {
			if n := fake.Count(routeConnect, "", name); n != 0 {
				t.Errorf("%d connects of %s after a network change", n, name)
			}
		}
		r.at(time.Minute + 2*time.Second)
		r.eng.NetworkChanged()
		r.at(time.Minute + 31*time.Second - time.Millisecond)
		if got := r.connectTimes(dirA, "rem"); len(got) != 1 {
			t.Fatalf("remote connects = %v after a second change within max-delay, want still one", got)
		}
		r.at(5 * time.Minute)
		if got := r.connectTimes(dirA, "rem"); !equalDurations(got, secs(61, 91)) {
			t.Fatalf("remote connects = %v, want the renewal at 61 s and the second change's at 91 s", got)
		}
		if n := fake.Count(routeConnect, "", "") - fake.Count(routeConnect, "", "rem"); n != 0 {
			t.Fatalf("%d connects of other servers", n)
		}
	})
}

// A change beside a way out that stayed (a container bridge coming up:
// InterfacesChanged) can kill no held connection: the failed server is
// retried at once, outside its backoff, and the connected remote server
// keeps its session.
func TestInterfacesChangeRetriesFailedServersOnly(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{
			"rem":  {Type: "remote", URL: "http://rem.test:9000/mcp"},
			"down": {Status: "failed", Type: "remote", URL: "http://down.test:9000/mcp"},
		})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(time.Minute) // down's fast episode spent (1, 2, 4, 8, 16 s): slow tier
		if got := r.connectTimes(dirA, "down"); !equalDurations(got, secs(1, 2, 4, 8, 16)) {
			t.Fatalf("setup: down connects = %v", got)
		}
		r.eng.InterfacesChanged()
		r.at(2 * time.Minute)
		if got := r.connectsIn(dirA, "down", time.Minute, time.Hour); len(got) != 1 || got[0] > time.Minute+100*time.Millisecond {
			t.Fatalf("down connects after the change = %v, want one at once (60 s)", got)
		}
		if n := fake.Count(routeConnect, "", "rem"); n != 0 {
			t.Fatalf("%d connects of the connected remote server after a change that moved no way out", n)
		}
	})
}

// Rule 7: the change only makes the directory due; a server the user
// disabled (or that came to need auth) after the last read is left alone,
// as the check's fresh read shows it (rule 1).
func TestNetworkChangeDecidesFromAFreshRead(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{
			"rem":  {Type: "remote", URL: "http://rem.test:9000/mcp"},
			"auth": {Type: "remote", URL: "http://auth.test:9000/mcp"},
		})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(10 * time.Second)
		fake.SetStatus(dirA, "rem", "disabled", "")
		fake.SetStatus(dirA, "auth", "needs_auth", "")
		reads := fake.Count(routeStatus, dirA, "")
		r.eng.NetworkChanged()
		r.at(12 * time.Second)
		if fake.Count(routeStatus, dirA, "") == reads {
			t.Fatal("the network change did not make the directory due")
		}
		if n := fake.Count(routeConnect, "", ""); n != 0 {
			t.Fatalf("%d connects of servers the fresh read shows disabled and needs_auth", n)
		}
	})
}

// SPEC rule 5: a renewal is charged like any network-triggered attempt.
// A connected remote server still in the slow tier (a crash loop that
// someone else ended, not yet stable) is renewed no sooner than max-delay
// after its last attempt; with slow-interval 0 (stopped) never.
func TestNetworkChangeRenewalInSlowTierWaitsForMaxDelay(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		const url = "http://rem.test:9000/mcp"
		fake := g.new(map[string]Spec{"rem": {Status: "failed", Type: "remote", URL: url}})
		fake.SetDirConfig("/stopped", map[string]Spec{"rem": {Status: "failed", Type: "remote", URL: url}})
		cfg := noJitter()
		r := newRig(t, fake, cfg, nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(17 * time.Second) // fast episode spent: 1, 2, 4, 8, 16 s
		if got := r.connectTimes(dirA, "rem"); !equalDurations(got, secs(1, 2, 4, 8, 16)) {
			t.Fatalf("setup: connects = %v", got)
		}
		fake.SetStatus(dirA, "rem", "connected", "") // someone else connected it
		r.eng.NetworkChanged()
		r.at(46*time.Second - time.Millisecond)
		if got := r.connectsIn(dirA, "rem", 17*time.Second, time.Hour); len(got) != 0 {
			t.Fatalf("renewed at %v, within max-delay of the slow tier's last attempt (16 s)", got)
		}
		r.at(46*time.Second + time.Millisecond)
		if got := r.connectsIn(dirA, "rem", 17*time.Second, time.Hour); !equalDurations(got, secs(46)) {
			t.Fatalf("renewals = %v, want one at 46 s (max-delay after the last attempt)", got)
		}
	})
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"rem": {Status: "failed", Type: "remote", URL: "http://rem.test:9000/mcp"}})
		cfg := noJitter()
		cfg.Backoff.SlowInterval = 0
		cfg.StableAfter = time.Hour // stays stopped through the test
		r := newRig(t, fake, cfg, nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(17 * time.Second)
		fake.SetStatus(dirA, "rem", "connected", "")
		r.at(50 * time.Second) // the idle check read it connected
		r.eng.NetworkChanged()
		r.at(10 * time.Minute)
		if got := r.connectTimes(dirA, "rem"); len(got) != 5 {
			t.Fatalf("connects = %v: a stopped episode was renewed", got)
		}
	})
}

// A change while a connect of the server is in flight: the session it
// makes may predate the change, so the read after it decides, and renews
// it (a read taken meanwhile, here for a failed server beside it, does not
// drop the change).
func TestNetworkChangeDuringConnectRenewsAfterIt(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{
			"rem": {Status: "failed", Type: "remote", URL: "http://rem.test:9000/mcp", AfterConnect: "connected", ConnectDelay: 3 * time.Second},
			"f":   {Status: "failed"},
		})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(2 * time.Second) // rem's connect runs from 1 s to 4 s
		if s := r.server(dirA, "rem"); !s.Connecting {
			t.Fatalf("setup: %+v, want a connect in flight", s)
		}
		reads := fake.Count(routeStatus, dirA, "")
		r.eng.NetworkChanged()
		r.at(3 * time.Second)
		if fake.Count(routeStatus, dirA, "") == reads {
			t.Fatal("setup: no read during the connect")
		}
		r.at(10 * time.Second)
		got := r.connectTimes(dirA, "rem")
		if len(got) != 2 || got[1] < 4*time.Second {
			t.Fatalf("rem connects = %v, want the first (1 s) and a renewal after it returned (4 s)", got)
		}
		if s := r.server(dirA, "rem"); s.Status != "connected" {
			t.Fatalf("%+v", s)
		}
	})
}

// A change while a check's status read is in flight: the read's reconcile
// renews the connected remote server once; the check the change also
// asked for, after it, renews nothing more.
func TestNetworkChangeDuringACheckRenewsOnce(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"rem": {Type: "remote", URL: "http://rem.test:9000/mcp"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(5 * time.Second)
		fake.SetStatusDelay(2 * time.Second)
		r.eng.Reconnect(dirA, []string{"nothing"}) // a check now, its read slow
		r.at(5*time.Second + time.Second)
		r.eng.NetworkChanged() // the read is in flight
		r.at(20 * time.Second)
		if got := r.connectTimes(dirA, "rem"); len(got) != 1 {
			t.Fatalf("rem connects = %v, want one renewal", got)
		}
	})
}

// A directory armed but not read yet when the network changes: its first
// read renews the connected remote server it finds (OpenCode connected it
// before the change).
func TestNetworkChangeReachesServersNotReadYet(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"rem": {Type: "remote", URL: "http://rem.test:9000/mcp"}, "loc": {}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		r.at(500 * time.Millisecond)
		r.eng.NetworkChanged()
		r.at(3 * time.Second)
		if got := r.connectTimes(dirA, "rem"); !equalDurations(got, secs(1)) {
			t.Fatalf("rem connects = %v, want the renewal at the first check (1 s)", got)
		}
		if n := fake.Count(routeConnect, "", "loc"); n != 0 {
			t.Fatalf("%d connects of the local server", n)
		}
	})
}

// A flapping network (a change every 600 ms for ten minutes) renews a
// connected remote server at most once per max-delay, and reads no
// directory that holds nothing a change may touch (only local servers).
func TestFlappingNetworkRenewsAtMostOncePerMaxDelay(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"rem": {Type: "remote", URL: "http://rem.test:9000/mcp"}})
		fake.SetDirConfig("/locals", map[string]Spec{"loc": {}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		_ = r.eng.Arm("/locals", "test")
		r.at(10 * time.Second)
		locals := fake.Count(routeStatus, "/locals", "")
		for i := range 1000 {
			r.eng.NetworkChanged()
			r.at(10*time.Second + time.Duration(i)*600*time.Millisecond)
		}
		n := len(r.connectTimes(dirA, "rem"))
		if n > 20+1 {
			t.Fatalf("%d renewals in ten minutes of network changes, want at most one per max-delay", n)
		}
		if n < 15 {
			t.Fatalf("%d renewals in ten minutes of network changes, want about one per max-delay", n)
		}
		// Idle checks alone: one per idle interval.
		if got := fake.Count(routeStatus, "/locals", "") - locals; got > 21 {
			t.Fatalf("%d reads of a directory of local servers under the changes, want its idle checks alone", got)
		}
	})
}

// Many directories, each with two connected remote servers, and the
// default budget of two connects: one network change renews every one of
// them exactly once, never more connects in flight than the budget; the
// ones that waited for a slot were not charged for the wait.
func TestNetworkChangeRenewsManyDirectoriesWithinTheBudget(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{
			"a": {Type: "remote", URL: "http://a.test:9000/mcp", ConnectDelay: 200 * time.Millisecond},
			"b": {Type: "remote", URL: "http://b.test:9000/mcp", ConnectDelay: 200 * time.Millisecond},
		})
		r := newRig(t, fake, noJitter(), nil)
		var dirs []string
		for i := range 40 {
			d := fmt.Sprintf("/p%02d", i)
			dirs = append(dirs, d)
			_ = r.eng.Arm(d, "test")
		}
		r.at(10 * time.Second)
		r.eng.NetworkChanged()
		r.at(2 * time.Minute)
		for _, d := range dirs {
			for _, name := range []string{"a", "b"} {
				if got := r.connectTimes(d, name); len(got) != 1 {
					t.Fatalf("%s %s connects = %v, want one renewal", d, name, got)
				}
				if s := r.server(d, name); s.Attempts > 1 {
					t.Fatalf("%s %s: %+v, want the one renewal charged, not the waits", d, name, s)
				}
			}
		}
		if n := fake.MaxConcurrentConnects(); n > DefaultConfig.MaxConcurrent {
			t.Fatalf("%d connects in flight at once, want at most %d", n, DefaultConfig.MaxConcurrent)
		}
	})
}

// forget drops the endpoint's side of every connection without closing
// it: after the network changed, a connection the server lost (it
// restarted meanwhile, and its reset never arrived) stays open here, and
// silent.
func (ep *endpoint) forget() {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.conns = nil
}

// After a network change, every endpoint watch is dialled anew, also one
// shared with a server the change did not renew (in /b its episode is
// stopped: slow-interval 0 after its fast episode, connected again by
// someone else and not yet stable): the held connection from before may
// be dead without a word, and a watch over it would miss the server's
// next restart.
func TestNetworkChangeRedialsSharedEndpointWatches(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		const url = "http://r.test:9000/mcp"
		ep := &endpoint{}
		ep.up.Store(true)
		fake := g.new(map[string]Spec{"r": {Status: "connected", Type: "remote", URL: url, AfterConnect: "connected"}})
		fake.SetDirConfig("/b", map[string]Spec{"r": {Status: "failed", Type: "remote", URL: url}})
		cfg := noJitter()
		cfg.Backoff.SlowInterval = 0
		r := newRigFlapping(t, fake, cfg, Options{}, ep)
		_ = r.eng.Arm("/a", "test")
		_ = r.eng.Arm("/b", "test")
		r.at(25 * time.Second)
		if s := r.server("/b", "r"); s.Tier != TierStopped {
			t.Fatalf("setup: /b r = %+v, want stopped", s)
		}
		fake.SetStatus("/b", "r", "connected", "") // someone else connected it
		r.at(49 * time.Second)                     // /b's idle check saw it: its watch shares /a's
		if s := r.server("/b", "r"); s.Status != "connected" {
			t.Fatalf("setup: /b r = %+v, want connected", s)
		}
		ep.forget() // the held connection died silently
		r.at(50 * time.Second)
		r.eng.NetworkChanged()
		r.at(55 * time.Second) // /a renewed its session
		renewed := len(r.connectTimes("/a", "r"))
		if renewed != 1 {
			t.Fatalf("/a connects after the change = %v, want its renewal", r.connectTimes("/a", "r"))
		}
		// The server restarts: its connections drop, new ones are refused
		// for 3 s.
		r.at(60 * time.Second)
		ep.up.Store(false)
		ep.close()
		r.at(63 * time.Second)
		ep.up.Store(true)
		r.at(66 * time.Second)
		if got := r.connectTimes("/a", "r"); len(got) != renewed+1 || got[renewed] < 63*time.Second {
			t.Fatalf("/a connects = %v, want one more soon after the endpoint came back at 63 s", got)
		}
	})
}

// Rule 4: a server that never failed is not a crash loop. A network that
// changes every 40 s for four minutes (a VPN re-keying, Wi-Fi roaming,
// docker compose bringing bridges up and down) renews a healthy remote
// session each max-delay; those renewals succeed, and must not walk the
// server's episode into the slow tier: when the server then really
// fails, that is a first crash, repaired at once, not five minutes
// later.
func TestNetworkRenewalsDoNotMakeAHealthyServerACrashLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.set("/p", "rem", "connected")
		oc.config["rem"] = opencode.MCPEntry{Type: "remote", URL: "http://rem.test:9000/mcp"}
		oc.after["rem"] = "connected"
		oc.delay["rem"] = 200 * time.Millisecond
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Arm("/p", ArmedByFlag)
		stop := runEngine(e)
		defer stop()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		start := time.Now()
		for range 6 {
			e.NetworkChanged()
			time.Sleep(40 * time.Second)
			synctest.Wait()
		}
		renewals := len(oc.connectTimes("/p", "rem", start))
		if renewals < 5 {
			t.Fatalf("setup: %d renewals", renewals)
		}
		row := e.Snapshot().Directories[0].Servers[0]
		crashed := time.Now()
		oc.set("/p", "rem", "failed")
		e.HandleEvent(opencode.Event{Kind: opencode.KindServerFailed, Type: "mcp.tools.changed", Directory: "/p", Server: "rem"})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(oc.connectTimes("/p", "rem", crashed)) - renewals; n == 0 {
			t.Fatalf("after %d successful renewals (row before the crash: attempts %d) the server's first failure got no connect within 5 s (row now: %+v)",
				renewals, row.Attempts, e.Snapshot().Directories[0].Servers[0])
		}
	})
}

// A network change (a VPN connecting) is the moment a remote server that
// was unreachable may answer: SPEC "Reacts to network changes … with an
// immediate fresh check everywhere". The renewals of healthy remote
// sessions the same change asks for must not make those repairs wait:
// with 60 directories holding a connected remote server (each connect
// takes a second, as a remote initialize over a fresh VPN may) and 10
// whose remote server failed while the VPN was down, every failed server
// is connected before any session is renewed, so within the ten seconds
// the budget's one remote slot (--max-concurrent 2 keeps the other for
// local servers) needs for ten such connects.
func TestNetworkChangeRepairsFailedServersBeforeRenewingHealthyOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oc := newStub()
		oc.config["rem"] = opencode.MCPEntry{Type: "remote", URL: "http://rem.test:9000/mcp"}
		oc.config["down"] = opencode.MCPEntry{Type: "remote", URL: "http://down.test:9000/mcp"}
		oc.delay["rem"] = time.Second
		oc.delay["down"] = time.Second
		oc.after["rem"] = "connected"
		oc.after["down"] = "connected"
		e, err := New(noJitter(), oc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var failed []string
		for i := range 60 {
			d := fmt.Sprintf("/ok%02d", i)
			oc.set(d, "rem", "connected")
			_ = e.Arm(d, ArmedByFlag)
		}
		for i := range 10 {
			d := fmt.Sprintf("/down%02d", i)
			oc.set(d, "down", "failed")
			_ = e.Arm(d, ArmedByFlag)
			failed = append(failed, d)
		}
		oc.mu.Lock()
		saved := oc.after["down"]
		delete(oc.after, "down") // unreachable: attempts leave it failed
		oc.mu.Unlock()
		stop := runEngine(e)
		defer stop()
		time.Sleep(2 * time.Minute) // the failed ones spent their fast episode: slow tier
		synctest.Wait()
		oc.mu.Lock()
		oc.after["down"] = saved // the VPN is up: it answers again
		oc.mu.Unlock()

		changed := time.Now()
		e.NetworkChanged()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		firstRenewal := time.Hour
		for i := range 60 {
			if c := connectsSince(oc, fmt.Sprintf("/ok%02d", i), "rem", changed); len(c) > 0 {
				firstRenewal = min(firstRenewal, c[0])
			}
		}
		var late []string
		for _, d := range failed {
			if c := connectsSince(oc, d, "down", changed); len(c) == 0 || c[0] > firstRenewal {
				late = append(late, d)
			}
		}
		if len(late) > 0 {
			t.Fatalf("10 s after the network change %d of 10 failed remote servers got no connect before the first renewal of a connected session (at %v): %v",
				len(late), firstRenewal, late)
		}
	})
}

// SPEC rule 5: in the slow tier, attempts caused by a network change come
// at most once per max-delay. A change soon after the server dropped to
// the slow tier (its last attempt under a second ago, and no network-triggered
// attempt yet, so the network limit of its own says nothing) waits until
// max-delay after that last attempt; a storm of changes after it buys one
// attempt per max-delay.
func TestNetworkChangeInSlowTierWaitsForMaxDelay(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		fake := g.new(map[string]Spec{"f": {Status: "failed"}})
		r := newRig(t, fake, noJitter(), nil)
		_ = r.eng.Arm(dirA, "test")
		// Step to the moment the fast episode is spent, whatever its
		// schedule.
		for sec := 1; ; sec++ {
			r.at(time.Duration(sec) * time.Second)
			if n := len(r.connectTimes(dirA, "f")); n > 0 && r.server(dirA, "f").Tier == TierSlow {
				break
			}
			if sec > 120 {
				t.Fatal("not in the slow tier after two minutes")
			}
		}
		fast := r.connectTimes(dirA, "f")
		last := fast[len(fast)-1]
		r.eng.NetworkChanged()
		r.at(last + 30*time.Second - time.Millisecond)
		if got := r.connectTimes(dirA, "f"); len(got) != len(fast) {
			t.Fatalf("connects = %v: a network change in the slow tier came within max-delay of the last attempt (%v)", got, last)
		}
		r.at(last + 30*time.Second + time.Millisecond)
		got := r.connectTimes(dirA, "f")
		if len(got) != len(fast)+1 || got[len(fast)] != last+30*time.Second {
			t.Fatalf("connects = %v, want one more at %v (max-delay after the last)", got, last+30*time.Second)
		}
		// Ten minutes of changes: one attempt per max-delay at most.
		start := time.Since(r.start)
		for i := range 1000 {
			r.eng.NetworkChanged()
			r.at(start + time.Duration(i)*600*time.Millisecond)
		}
		if n := len(r.connectTimes(dirA, "f")) - len(got); n > 20+1 {
			t.Fatalf("%d connects in ten minutes of network changes in the slow tier, want at most one per max-delay", n)
		}
	})
}
