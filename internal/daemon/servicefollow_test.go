package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// The daemon stays with the OpenCode 2 service it follows through
// failures that prove nothing (a timeout, a 503 "not yet"), and leaves it
// only on evidence: a refused connection, its file rewritten or stale,
// its pid gone, or no answer for a whole minute (followPatience). Moving
// is not free: the other service boots every --directory and starts its
// MCP servers.

// failing fails requests to host while failures are left: a timeout, or
// 503 with Retry-After (OpenCode 2's "not yet": docs/opencode.md); -1
// failures fail every request.
type failing struct {
	rt       http.RoundTripper
	mu       sync.Mutex
	host     string
	notYet   bool
	failures int
}

func (f *failing) fail(host string, notYet bool, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.host, f.notYet, f.failures = host, notYet, n
}

func (f *failing) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	fail := r.URL.Host == f.host && f.failures != 0
	if fail && f.failures > 0 {
		f.failures--
	}
	notYet := f.notYet
	f.mu.Unlock()
	switch {
	case !fail:
		return f.rt.RoundTrip(r)
	case notYet:
		rec := httptest.NewRecorder()
		rec.Header().Set("Retry-After", "1")
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteHeader(http.StatusServiceUnavailable)
		_, _ = rec.WriteString(`{"code":"service_starting"}`)
		resp := rec.Result()
		resp.Request = r
		return resp, nil
	}
	return nil, fmt.Errorf("Get %q: %w", r.URL, context.DeadlineExceeded)
}

const (
	latestHost = "127.0.0.1:1001" // service.json's service, pid 1001
	betaHost   = "127.0.0.1:1002" // service-beta.json's, pid 1002: the one followed
)

// twoChannels runs the services of two channels and has a follower
// follow the beta channel's (registered an hour ago); then the latest
// channel's service registers too. Call inside a bubble.
func twoChannels(t *testing.T) (sc Target, hosts *fakeopencode.Hosts, rt *failing, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "opencode")
	hosts = fakeopencode.NewHosts()
	t.Cleanup(hosts.Close)
	for _, pid := range []int{1001, 1002} {
		svc := fake2.New(nil)
		svc.SetPID(pid)
		hosts.Serve(fmt.Sprintf("127.0.0.1:%d", pid), svc)
	}
	now := time.Now()
	registerService(t, filepath.Join(dir, "service-beta.json"), "http://"+betaHost, fake2.DefaultVersion, 1002, fake2.DefaultPassword, now.Add(-time.Hour))
	rt = &failing{rt: hosts.Transport()}
	sc = followService(filepath.Join(dir, "service.json"), true, nil, rt)
	if url, _, err := sc.Discover(context.Background()); err != nil || url != "http://"+betaHost {
		t.Fatalf("setup: %q, %v; want the beta service", url, err)
	}
	registerService(t, filepath.Join(dir, "service.json"), "http://"+latestHost, fake2.DefaultVersion, 1001, fake2.DefaultPassword, now)
	return sc, hosts, rt, dir
}

// following asks the follower where the server is, as a re-subscribe
// does, and returns the URL and whether the follower answered for the
// service it follows despite its failure (errHeld).
func following(t *testing.T, sc Target) (string, bool) {
	t.Helper()
	url, _, err := sc.Discover(context.Background())
	if err != nil && !errors.Is(err, errHeld) {
		t.Fatalf("discover: %q, %v", url, err)
	}
	return url, err != nil
}

// One timed-out request of the followed service (a busy moment) does not
// move the daemon to another channel's service, which answers: it stays
// with the one it follows, which answers again.
func TestOneTimeoutKeepsTheServiceFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, _, rt, _ := twoChannels(t)
		rt.fail(betaHost, false, 1)
		if url, held := following(t, sc); url != "http://"+betaHost || !held {
			t.Fatalf("after one timeout: %q (held %v), want the beta service, held", url, held)
		}
		for range 3 {
			if url, held := following(t, sc); url != "http://"+betaHost || held {
				t.Fatalf("after one timeout the daemon follows %q (held %v), want the beta service, answering", url, held)
			}
		}
	})
}

// The same for OpenCode 2's "not yet": a 503 with Retry-After (it answers
// so for a moment while it restarts in place) is no failure, and moves
// nothing.
func TestOneNotYetKeepsTheServiceFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, _, rt, _ := twoChannels(t)
		rt.fail(betaHost, true, 1)
		if url, held := following(t, sc); url != "http://"+betaHost || !held {
			t.Fatalf("after one 503: %q (held %v), want the beta service, held", url, held)
		}
		time.Sleep(2 * time.Second) // past the Retry-After
		for range 3 {
			if url, _ := following(t, sc); url != "http://"+betaHost {
				t.Fatalf("one \"not yet\" of the followed service moved the daemon to %q", url)
			}
		}
	})
}

// A storm of "not yet" shorter than a minute keeps the service; a
// service that answers nothing but timeouts for a whole minute is left
// for the other channel's, which answers. An answer in between starts
// the minute afresh.
func TestSilentServiceIsLeftAfterAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, _, rt, _ := twoChannels(t)
		start := time.Now()
		rt.fail(betaHost, true, -1) // a 503 storm
		for time.Since(start) < 50*time.Second {
			if url, _ := following(t, sc); url != "http://"+betaHost {
				t.Fatalf("%v into a 503 storm the daemon follows %q", time.Since(start), url)
			}
			time.Sleep(5 * time.Second)
		}
		rt.fail(betaHost, false, 0) // it answers once
		if url, held := following(t, sc); url != "http://"+betaHost || held {
			t.Fatalf("after the storm: %q (held %v)", url, held)
		}
		silent := time.Now()
		rt.fail(betaHost, false, -1) // then only timeouts
		for {
			time.Sleep(5 * time.Second)
			url, _ := following(t, sc)
			if url == "http://"+betaHost && time.Since(silent) < 2*time.Minute {
				continue
			}
			if url != "http://"+latestHost || time.Since(silent) < time.Minute || time.Since(silent) > time.Minute+5*time.Second {
				t.Fatalf("%v after the service fell silent the daemon follows %q, want the latest channel's service a minute after", time.Since(silent), url)
			}
			break
		}
	})
}

// A refused connection is evidence: nothing listens where the followed
// service was, and the daemon follows the other channel's at once.
func TestRefusedServiceIsLeftAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, hosts, _, _ := twoChannels(t)
		hosts.Stop(betaHost)
		if url, held := following(t, sc); url != "http://"+latestHost || held {
			t.Fatalf("the followed service refused: the daemon follows %q (held %v), want the latest channel's", url, held)
		}
	})
}

// A rewritten file registers another service: the channel's service
// restarted. The daemon follows what the file names now: at once when it
// answers, and through its "not yet" while it starts (a minute at most,
// as for the service before it); it does not move to the other channel's
// service meanwhile.
func TestRewrittenServiceFileIsFollowed(t *testing.T) {
	for _, starting := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			sc, hosts, rt, dir := twoChannels(t)
			svc := fake2.New(nil)
			svc.SetPID(1003)
			hosts.Serve("127.0.0.1:1003", svc)
			if starting {
				rt.fail("127.0.0.1:1003", true, 3)
			}
			registerService(t, filepath.Join(dir, "service-beta.json"), "http://127.0.0.1:1003", fake2.DefaultVersion, 1003, fake2.DefaultPassword, time.Now())
			for range 4 {
				url, held := following(t, sc)
				if url != "http://127.0.0.1:1003" {
					t.Fatalf("the beta service restarted on another port (starting: %v): the daemon follows %q, want it there", starting, url)
				}
				if !held {
					return
				}
				time.Sleep(time.Second)
			}
			t.Fatal("the restarted beta service answered, and was not followed")
		})
	}
}

// A file that is gone is evidence: the followed service exited cleanly
// (it removes its file), and the daemon follows the other channel's at
// once.
func TestRemovedServiceFileIsLeftAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, _, rt, dir := twoChannels(t)
		rt.fail(betaHost, false, -1)
		if err := os.Remove(filepath.Join(dir, "service-beta.json")); err != nil {
			t.Fatal(err)
		}
		if url, held := following(t, sc); url != "http://"+latestHost || held {
			t.Fatalf("the beta service's file is gone: the daemon follows %q (held %v), want the latest channel's", url, held)
		}
	})
}

// A stale file is evidence: another process answers at its URL, or the
// service's pid, alive when the daemon chose it, is gone (while its port
// only times out); the daemon follows the other channel's service at
// once. A pid the daemon never saw alive (another pid namespace) proves
// nothing.
func TestStaleServiceFileIsLeftAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, hosts, _, _ := twoChannels(t)
		other := fake2.New(nil)
		other.SetPID(4242)
		hosts.Serve(betaHost, other)
		if url, held := following(t, sc); url != "http://"+latestHost || held {
			t.Fatalf("another process answers at the beta service's URL: the daemon follows %q (held %v), want the latest channel's", url, held)
		}
	})
	for _, seen := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "opencode")
			hosts := fakeopencode.NewHosts()
			defer hosts.Close()
			for _, pid := range []int{1001, 1002} {
				svc := fake2.New(nil)
				svc.SetPID(pid)
				hosts.Serve(fmt.Sprintf("127.0.0.1:%d", pid), svc)
			}
			var betaAlive atomic.Bool
			betaAlive.Store(seen)
			registerService(t, filepath.Join(dir, "service-beta.json"), "http://"+betaHost, fake2.DefaultVersion, 1002, fake2.DefaultPassword, time.Now().Add(-time.Hour))
			rt := &failing{rt: hosts.Transport()}
			sc := followService(filepath.Join(dir, "service.json"), true, nil, rt)
			sc.follow.alive = func(pid int) bool { return pid != 1002 || betaAlive.Load() }
			if url, _ := following(t, sc); url != "http://"+betaHost {
				t.Fatalf("setup: %q", url)
			}
			registerService(t, filepath.Join(dir, "service.json"), "http://"+latestHost, fake2.DefaultVersion, 1001, fake2.DefaultPassword, time.Now())
			betaAlive.Store(false) // gone, or never seen
			rt.fail(betaHost, false, -1)
			url, held := following(t, sc)
			switch {
			case seen && (url != "http://"+latestHost || held):
				t.Fatalf("the beta service's pid is gone: the daemon follows %q (held %v), want the latest channel's", url, held)
			case !seen && (url != "http://"+betaHost || !held):
				t.Fatalf("a pid the daemon never saw alive counted as gone: it follows %q (held %v)", url, held)
			}
		})
	}
}

// cutOnce cuts the event stream of host once cut is closed: a busy moment
// of the followed service (2.x ends a subscriber's stream when its queue
// overflows).
type cutOnce struct {
	rt   http.RoundTripper
	host string
	cut  chan struct{}
}

type cutBody struct {
	rc  io.ReadCloser
	cut <-chan struct{}
}

func (b *cutBody) Read(p []byte) (int, error) {
	type res struct {
		n   int
		err error
	}
	ch := make(chan res, 1)
	go func() { n, err := b.rc.Read(p); ch <- res{n, err} }()
	select {
	case r := <-ch:
		return r.n, r.err
	case <-b.cut:
		_ = b.rc.Close()
		<-ch
		return 0, io.ErrUnexpectedEOF
	}
}

func (b *cutBody) Close() error { return b.rc.Close() }

func (c *cutOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil && r.URL.Host == c.host && strings.HasSuffix(r.URL.Path, "/event") {
		select {
		case <-c.cut:
		default:
			resp.Body = &cutBody{rc: resp.Body, cut: c.cut}
		}
	}
	return resp, err
}

// The whole daemon follows the beta channel's service, the one the
// user's TUIs use, with /p named by --directory. Its event stream drops
// once while that service is busy, and the re-detection's one request to
// it times out. The daemon stays with it: it subscribes to it again, and
// never reads /p on the latest channel's service (which would boot /p
// there and start its MCP servers: rule 3, 13).
func TestAStreamDropWithOneTimeoutKeepsTheWholeDaemon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "opencode")
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		svcs := map[int]*fake2.Server{}
		for _, pid := range []int{1001, 1002} {
			svc := fake2.New(map[string]fakeopencode.Spec{"s": {}})
			svc.SetPID(pid)
			svc.SetHeartbeat(time.Second)
			hosts.Serve(fmt.Sprintf("127.0.0.1:%d", pid), svc)
			svcs[pid] = svc
		}
		latest := filepath.Join(dir, "service.json")
		registerService(t, filepath.Join(dir, "service-beta.json"), "http://"+betaHost, fake2.DefaultVersion, 1002, fake2.DefaultPassword, time.Now().Add(-time.Hour))
		slow := &failing{rt: hosts.Transport()}
		rt := &cutOnce{rt: slow, host: betaHost, cut: make(chan struct{})}
		sc := followService(latest, true, nil, rt)
		sc.Directories = []string{"/p"}
		logs := &logBuffer{}
		runFollowing(t, sc, slog.New(slog.NewTextHandler(logs, nil)))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if svcs[1002].Subscribers() != 1 || svcs[1002].Count(fake2.RouteMCP, "/p", "") == 0 {
			t.Fatalf("setup: the beta service is not followed (%d subscribers, %d reads of /p):\n%s", svcs[1002].Subscribers(), svcs[1002].Count(fake2.RouteMCP, "/p", ""), logs)
		}
		registerService(t, latest, "http://"+latestHost, fake2.DefaultVersion, 1001, fake2.DefaultPassword, time.Now())
		time.Sleep(time.Minute) // both run; the daemon stays with beta
		synctest.Wait()

		slow.fail(betaHost, false, 1)
		close(rt.cut) // the busy moment: the stream drops, one request times out
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := svcs[1001].Count(fake2.RouteMCP, "/p", ""); n != 0 || svcs[1002].Subscribers() != 1 {
			t.Errorf("after one dropped stream and one timed-out request of the beta service (which answers all along), the daemon subscribes to it %d times and made the latest channel's service read /p %d times:\n%s",
				svcs[1002].Subscribers(), n, logs)
		}
	})
}

// A stale service file whose port another user of the machine now holds:
// the service's password (which the next service reuses) is never sent
// there, and the file is said to be stale with the reason.
func TestServicePasswordNeverGoesToAnotherUsersListener(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "opencode")
	hosts := fakeopencode.NewHosts()
	defer hosts.Close()
	svc := fake2.New(nil)
	hosts.Serve("127.0.0.1:49374", svc)
	file := filepath.Join(dir, "service.json")
	registerService(t, file, "http://127.0.0.1:49374", fake2.DefaultVersion, fake2.DefaultPID, fake2.DefaultPassword, time.Now())
	sc := followService(file, false, nil, hosts.Transport())
	sc.follow.listener = func(string) error { return errors.New("what listens at 127.0.0.1:49374 is another user's process") }
	_, _, err := sc.follow.find(context.Background())
	if !errors.Is(err, opencode.ErrStaleService) || !strings.Contains(err.Error(), "another user's process") {
		t.Fatalf("find = %v, want a stale file because of the listener", err)
	}
	if n := svc.Count(fake2.RouteInfo, "", ""); n != 0 {
		t.Fatalf("the password went to another user's listener (%d requests)", n)
	}
	sc.follow.listener = func(string) error { return nil }
	if got, _, err := sc.follow.find(context.Background()); err != nil || got.Path != file {
		t.Fatalf("with the service's own listener, find = %+v, %v", got, err)
	}
}

// ListenerOfOtherUser knows nothing against a listener of this user, a
// free port, another host or a URL without a port.
func TestListenerOfThisUserIsNotRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, u := range []string{"http://" + l.Addr().String(), "http://127.0.0.1:1", "http://example.com:49374", "http://127.0.0.1"} {
		if err := ListenerOfOtherUser(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// At login both channels' services start, and service.json's first
// answer is OpenCode 2's "not yet" (503, Retry-After) while it starts.
// That answer decides nothing: the daemon does not settle on the other
// channel's service, and follows service.json's once it answers.
func TestAStartingPreferredServiceIsNotPassedOverForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "opencode")
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		for _, pid := range []int{1001, 1002} {
			svc := fake2.New(nil)
			svc.SetPID(pid)
			hosts.Serve(fmt.Sprintf("127.0.0.1:%d", pid), svc)
		}
		now := time.Now()
		registerService(t, filepath.Join(dir, "service-beta.json"), "http://"+betaHost, fake2.DefaultVersion, 1002, fake2.DefaultPassword, now.Add(-time.Minute))
		registerService(t, filepath.Join(dir, "service.json"), "http://"+latestHost, fake2.DefaultVersion, 1001, fake2.DefaultPassword, now)
		rt := &failing{rt: hosts.Transport()}
		rt.fail(latestHost, true, 1) // the latest service is still starting
		sc := followService(filepath.Join(dir, "service.json"), true, nil, rt)
		first, _ := following(t, sc)
		time.Sleep(2 * time.Second) // it is ready
		for range 3 {
			if url, _ := following(t, sc); url != "http://"+latestHost {
				t.Fatalf("service.json's service said \"not yet\" once at the first look (the daemon chose %q then): the daemon follows %q, want service.json's %s once it answers", first, url, latestHost)
			}
			time.Sleep(5 * time.Second)
		}
	})
}

// Waiting for service.json's service is bounded as staying with the one
// followed is: one that answers nothing but "not yet" for a whole minute
// is passed over for the other channel's, which answers.
func TestAPreferredServiceNeverReadyIsPassedOverAfterAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "opencode")
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		for _, pid := range []int{1001, 1002} {
			svc := fake2.New(nil)
			svc.SetPID(pid)
			hosts.Serve(fmt.Sprintf("127.0.0.1:%d", pid), svc)
		}
		now := time.Now()
		registerService(t, filepath.Join(dir, "service-beta.json"), "http://"+betaHost, fake2.DefaultVersion, 1002, fake2.DefaultPassword, now.Add(-time.Minute))
		registerService(t, filepath.Join(dir, "service.json"), "http://"+latestHost, fake2.DefaultVersion, 1001, fake2.DefaultPassword, now)
		rt := &failing{rt: hosts.Transport()}
		rt.fail(latestHost, true, -1)
		sc := followService(filepath.Join(dir, "service.json"), true, nil, rt)
		start := time.Now()
		for {
			url, held := following(t, sc)
			if url == "http://"+latestHost && held && time.Since(start) < 2*time.Minute {
				time.Sleep(5 * time.Second)
				continue
			}
			if url != "http://"+betaHost || time.Since(start) < time.Minute || time.Since(start) > time.Minute+5*time.Second {
				t.Fatalf("%v into service.json's \"not yet\" the daemon follows %q (held %v), want the beta service a minute in", time.Since(start), url, held)
			}
			return
		}
	})
}

// A look at the state directory that fails (EMFILE: the daemon's
// descriptors are spent for a moment) is no news about the service
// followed: the daemon stays with it, and does not move to service.json's.
func TestAFailedLookAtTheStateDirectoryKeepsTheServiceFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, _, _, _ := twoChannels(t)
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		low := lim
		low.Cur = 0 // no new descriptor, for one look
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Fatal(err)
		}
		_, _, lookErr := sc.Discover(context.Background())
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		if lookErr == nil {
			t.Fatal("setup: the look at the state directory did not fail")
		}
		for range 3 {
			if url, _ := following(t, sc); url != "http://"+betaHost {
				t.Fatalf("after one failed look at the state directory (%v) the daemon follows %q, want the beta service it followed", lookErr, url)
			}
		}
	})
}
