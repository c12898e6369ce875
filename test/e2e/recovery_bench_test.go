package e2e

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// BenchmarkRecovery measures, on the real opencode with default flags, the
// seconds from a stdio server crash to `connected`, and from a late remote
// server becoming reachable to `connected`. The remote server was down when
// its directory was armed and first used, and comes up 2 to 14 s later (within the fast episode: a server that
// comes up after the fifth attempt waits for the slow tier, 5 min), so
// the runs land in different phases of the backoff (attempts 1, 2, 4, 8 and
// 16 s after arming). Run with `make bench`; results in BENCHMARKS.md.
func BenchmarkRecovery(b *testing.B) {
	const runs = 7
	// Ten remote runs, so a p95 means something.
	lateBy := []time.Duration{2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second, 6 * time.Second, 7 * time.Second,
		9 * time.Second, 10 * time.Second, 12 * time.Second, 14 * time.Second}
	b.Run("stdio-crash", func(b *testing.B) {
		for range b.N {
			oc := startOpenCode(b, 0, "")
			w := startWatch(b, oc, oc.Password)
			w.WaitLog(b, "watching opencode", 15*time.Second)
			var took []time.Duration
			for i := range runs {
				p := newProject(b, nil)
				name := fmt.Sprintf("s%d", i)
				rewriteProject(b, p, map[string]any{name: p.StdioServer(name)})
				oc.Status(b, p.Dir)
				start := time.Now()
				killPID(b, p.Starts(b, name)[0])
				p.WaitStarts(b, name, 2, 60*time.Second)
				oc.WaitStatus(b, p.Dir, name, "connected", 60*time.Second)
				took = append(took, time.Since(start))
			}
			report(b, took)
		}
	})
	lateRemote := func(b *testing.B, flags ...string) {
		for range b.N {
			oc := startOpenCode(b, 0, "")
			var took []time.Duration
			for i := range lateBy {
				p := newProject(b, nil)
				name := fmt.Sprintf("r%d", i)
				srv := newHTTPServer(b, p.ServerLog(name))
				rewriteProject(b, p, map[string]any{name: RemoteServer(srv.URL)})
				w := startWatch(b, oc, oc.Password, append([]string{"--directory", p.Dir}, flags...)...)
				w.WaitLog(b, "watching opencode", 15*time.Second)
				oc.Status(b, p.Dir)
				time.Sleep(lateBy[i])
				srv.Start(b)
				start := time.Now()
				oc.WaitStatus(b, p.Dir, name, "connected", 60*time.Second)
				took = append(took, time.Since(start))
			}
			report(b, took)
		}
	}
	// OpenCode 2 (the fake over loopback TCP, both profiles): a stdio
	// crash is a first crash (mcp.status.changed for a server last seen
	// connected), connected at once. The fake spawns nothing, so this is
	// the daemon's own share of a recovery: the real server's spawn time
	// comes on top.
	for _, profile := range []fake2.Profile{fake2.Release212, fake2.Preview} {
		b.Run("v2-stdio-crash/"+profile.Name, func(b *testing.B) {
			for range b.N {
				fake := fake2.NewProfile(profile, map[string]fakeopencode.Spec{"fs": {AfterConnect: "connected"}})
				fake.SetPassword(profilePassword)
				srv := serveHTTP(b, fake)
				watchFake(b, srv.URL)
				waitFor(b, 20*time.Second, "subscribed", func() bool { return fake.Subscribers() > 0 })
				route := fake2.RouteConnect
				if profile.Name == fake2.Preview.Name {
					route = fake2.RouteConnectDev
				}
				var took, toConnect []time.Duration
				for i := range runs {
					dir := b.TempDir()
					fake.Boot(dir)
					fake.Publish(dir, "session.created", map[string]any{"sessionID": fmt.Sprintf("ses_%d", i)})
					waitFor(b, 20*time.Second, "a status read", func() bool { return fake.Count(fake2.RouteMCP, dir, "") > 0 })
					time.Sleep(2 * time.Second)
					starts := fake.Starts(dir, "fs")
					crashed := time.Now()
					fake.Crash(dir, "fs")
					// Starts counts connects that left it connected.
					waitFor(b, 20*time.Second, "connected again", func() bool { return fake.Starts(dir, "fs") > starts })
					took = append(took, time.Since(crashed))
					toConnect = append(toConnect, connectAfter(fake, route, dir, "fs", crashed))
				}
				sort.Slice(toConnect, func(i, j int) bool { return toConnect[i] < toConnect[j] })
				fmt.Printf("%s: crash → connect request: %v (median %v)\n", b.Name(), toConnect, toConnect[len(toConnect)/2])
				report(b, took)
			}
		})
	}
	b.Run("late-remote", func(b *testing.B) { lateRemote(b) })
	b.Run("late-remote-no-probe", func(b *testing.B) { lateRemote(b, "--probe=false") })
}

func report(b *testing.B, took []time.Duration) {
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	med, mx := took[len(took)/2], took[len(took)-1]
	p95 := took[min(len(took)-1, int(float64(len(took))*0.95))]
	b.ReportMetric(med.Seconds(), "median-s")
	b.ReportMetric(p95.Seconds(), "p95-s")
	b.ReportMetric(mx.Seconds(), "max-s")
	fmt.Printf("%s: %d runs %v → median %.2fs, p95 %.2fs, max %.2fs\n", b.Name(), len(took), took, med.Seconds(), p95.Seconds(), mx.Seconds())
}
