package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/backoff"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"io"
	"io/fs"
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
)

// Two TUIs started at once start one daemon for the OpenCode 2 service;
// a later one finds it running.
func TestEnsureServiceWatchStartsOne(t *testing.T) {
	reg := &registry.Registry{Dir: t.TempDir() + "/daemons"}
	const file = "/home/me/.local/state/opencode/service.json"
	var starts atomic.Int32
	var removes []func()
	var mu sync.Mutex
	start := func() error {
		starts.Add(1)
		remove, err := reg.Register(registry.Entry{PID: os.Getpid(), URLs: []string{"http://127.0.0.1:49374"}, Service: file, StatusAddr: "127.0.0.1:1", Started: time.Now()})
		mu.Lock()
		removes = append(removes, remove)
		mu.Unlock()
		return err
	}
	defer func() {
		for _, r := range removes {
			r()
		}
	}()
	var wg sync.WaitGroup
	results := make([]bool, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started, err := EnsureServiceWatch(context.Background(), reg, file, start, 5*time.Second)
			if err != nil {
				t.Error(err)
			}
			results[i] = started
		}()
	}
	wg.Wait()
	if n := starts.Load(); n != 1 {
		t.Fatalf("%d daemons started for one service, want 1", n)
	}
	if _, _, ok, _ := ServiceDaemon(reg, file); !ok {
		t.Fatal("the service is not watched")
	}
	if _, _, ok, _ := ServiceDaemon(reg, "/other/service.json"); ok {
		t.Fatal("another service file counts as watched")
	}
}

// A daemon that never registers is reported, not waited for forever.
func TestEnsureServiceWatchReportsSilentStart(t *testing.T) {
	reg := &registry.Registry{Dir: t.TempDir() + "/daemons"}
	started, err := EnsureServiceWatch(context.Background(), reg, "/s.json", func() error { return nil }, 200*time.Millisecond)
	if !started || err == nil {
		t.Fatalf("started %v, err %v: want a start and an error", started, err)
	}
}

// writeServiceJSON registers a service the way OpenCode 2 does.
func writeServiceJSON(t *testing.T, path, url string, pid int, password string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	b := fmt.Sprintf(`{"id":"x","version":%q,"url":%q,"pid":%d,"password":%q}`, fake2.DefaultVersion, url, pid, password)
	if err := os.WriteFile(path, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// What ServiceServer's discovery finds: the service its file registers
// (verified by pid), another channel's when asked to look beside it, the
// 1.x fallback only while no service runs and only if OpenCode answers
// there; a fallback that refuses the credentials, or none at all, is an
// outage to wait out (never the refused password that would end a
// daemon), while the service's own refused password is said as such.
func TestServiceServerDiscovery(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "opencode")
	file := filepath.Join(dir, "service.json")
	svc := fake2.New(nil)
	svc.SetPassword("svc-pw")
	s2 := httptest.NewServer(svc)
	defer s2.Close()
	v1 := fakeopencode.New(nil)
	s1 := httptest.NewServer(v1)
	defer s1.Close()
	discover := func(channels bool, fallback *Target) (string, string, error) {
		return ServiceServer(file, channels, fallback).Discover(ctx)
	}

	if _, _, err := discover(true, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no service file, no fallback: %v, want not-exist", err)
	}
	if url, _, err := discover(true, &Target{URL: s1.URL}); err != nil || url != s1.URL {
		t.Errorf("no service, 1.x answering: %q, %v; want the fallback", url, err)
	}
	v1.Password = "other"
	if _, _, err := discover(true, &Target{URL: s1.URL}); !errors.Is(err, opencode.ErrUnavailable) || errors.Is(err, opencode.ErrUnauthorized) {
		t.Errorf("no service, the fallback refusing: %v, want unavailable (not unauthorized)", err)
	}
	closed := httptest.NewServer(v1)
	closed.Close()
	if _, _, err := discover(true, &Target{URL: closed.URL}); !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("no service, nothing at the fallback: %v, want unavailable", err)
	}

	// A channel's file only: found when looking beside service.json.
	writeServiceJSON(t, filepath.Join(dir, "service-beta.json"), s2.URL, fake2.DefaultPID, "svc-pw")
	if url, pw, err := discover(true, &Target{URL: s1.URL}); err != nil || url != s2.URL || pw != "svc-pw" {
		t.Errorf("service-beta.json: %q, %v", url, err)
	}
	if _, _, err := discover(false, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("service-beta.json without channels: %v, want not-exist", err)
	}

	// service.json wins; a stale one (another pid) is passed over.
	writeServiceJSON(t, file, s2.URL, fake2.DefaultPID+1, "svc-pw")
	if url, _, err := discover(true, nil); err != nil || url != s2.URL {
		t.Errorf("stale service.json, live channel: %q, %v", url, err)
	}
	if _, _, err := discover(false, &Target{URL: closed.URL}); !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("stale service.json only: %v", err)
	}
	writeServiceJSON(t, file, s2.URL, fake2.DefaultPID, "wrong-pw")
	if err := os.Remove(filepath.Join(dir, "service-beta.json")); err != nil { // else its service answers
		t.Fatal(err)
	}
	if _, _, err := discover(true, &Target{URL: s1.URL}); !errors.Is(err, opencode.ErrUnauthorized) {
		t.Errorf("the service refusing its file's password: %v, want unauthorized", err)
	}
	if sc := ServiceServer(file, false, nil); sc.URL != s2.URL || sc.ServiceFile != file {
		t.Errorf("first guess %q (file %q), want the file's URL", sc.URL, sc.ServiceFile)
	}
}

// While no service runs, a daemon following the service file looks again
// every few seconds (each look a stat of the files), not on the event
// stream's default 30 s backoff: a service that starts later is followed
// within about 5 s, and an absent one costs about a dozen stats a minute.
func TestServiceServerLooksEveryFewSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "opencode", "service.json")
		sc := ServiceServer(file, true, nil)
		var looks atomic.Int32
		discover := sc.Discover
		sc.Discover = func(ctx context.Context) (string, string, error) {
			looks.Add(1)
			return discover(ctx)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Config{Servers: []Target{sc}, Registry: &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")},
				Engine: fastConfig(), NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true}, slog.New(slog.DiscardHandler))
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		n := looks.Load()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// 0.5 s doubling to 5 s, ±20 %: about 15 in a minute (the 30 s
		// default would give 7).
		if n < 11 || n > 20 {
			t.Fatalf("%d looks for the service in a minute, want 11–20", n)
		}
	})
}

// The daemon started at login follows the service file through the path
// its environment spells (a symlinked state directory), before the
// service has written it; run, spelling the file another way, finds that
// daemon all the same, and starts no second one for the service (nor
// would that second one run beside it).
func TestServiceWatchedUnderAnotherSpellingBeforeTheServiceStarts(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "state")
	if err := os.MkdirAll(filepath.Join(state, "opencode"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "state-link")
	if err := os.Symlink(state, link); err != nil {
		t.Fatal(err)
	}
	reg := &registry.Registry{Dir: filepath.Join(root, "daemons")}
	first := otherDaemon(t, reg, filepath.Join(link, "opencode", "service.json"))
	file := filepath.Join(state, "opencode", "service.json") // not written yet
	e, req, ok, err := ServiceDaemon(reg, file)
	if err != nil || !ok || e.PID != first.PID || req.Service != first.Service {
		t.Fatalf("ServiceDaemon(%s) = %+v, %+v, %v, %v; want the daemon following %s, named by its spelling", file, e, req, ok, err, first.Service)
	}
	if _, _, ok, _ := ServiceDaemon(reg, filepath.Join(state, "opencode", "service-beta.json")); ok {
		t.Errorf("another channel's file counts as the same")
	}
}

// A service that answers but refuses the password its own file registers
// is the file ChooseService names (doctor says "its service refuses the
// password it registers"), with an error that matches ErrUnauthorized:
// not "no service answers".
func TestChooseServiceNamesTheServiceThatRefusesItsPassword(t *testing.T) {
	v2 := fake2.New(map[string]fakeopencode.Spec{"s": {}})
	hs := httptest.NewServer(v2)
	defer hs.Close()
	file := filepath.Join(t.TempDir(), "service.json")
	registerService(t, file, hs.URL, fake2.DefaultVersion, 4242, "not-"+fake2.DefaultPassword, time.Now())

	svc, others, err := ChooseService(context.Background(), file, false)
	if !errors.Is(err, opencode.ErrUnauthorized) {
		t.Fatalf("err = %v, want one that matches opencode.ErrUnauthorized", err)
	}
	if svc.Path != file || svc.URL != hs.URL || len(others) != 0 {
		t.Fatalf("ChooseService = %+v, %v; want the refusing service's file %s at %s", svc, others, file, hs.URL)
	}
}

// EnsureServiceWatch's lock is taken only by callers of
// EnsureServiceWatch; a daemon for the same service file that is starting
// (the one `service install` runs at login, or a `watch` typed by hand)
// registers only after it has detected every server (up to 5 s each) and
// bound its status API, and never takes the lock. A `run` in that window
// starts a second daemon for the same service: two engines check the same
// directories (rule 7) and double every connect.
func TestEnsureServiceWatchSeesAStartingDaemon(t *testing.T) {
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	const file = "/home/me/.local/state/opencode/service.json"
	slow := func(ctx context.Context) (string, string, error) {
		<-ctx.Done() // the service is slow to answer at login
		return "", "", ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{{URL: "http://127.0.0.1:1", Discover: slow, ServiceFile: file}},
			StatusAddr: "127.0.0.1:0", Registry: reg, Engine: fastConfig(), NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true},
			slog.New(slog.DiscardHandler))
	}()
	defer func() {
		cancel()
		<-done
	}()
	time.Sleep(200 * time.Millisecond) // the service daemon is starting
	var starts atomic.Int32
	_, _ = EnsureServiceWatch(context.Background(), reg, file, func() error { starts.Add(1); return nil }, 100*time.Millisecond)
	if n := starts.Load(); n != 0 {
		t.Fatalf("EnsureServiceWatch started a second daemon for %s while one was starting for it", file)
	}
}

// The OpenCode 2 service restarts on another port; the daemon
// follows it (Discover), but the engine's URL (status, events, the url
// label) and the registry keep the first port for the daemon's lifetime.
// `status` then names a server nothing listens on, and `reconnect --url`
// with the service's real URL is answered "this daemon does not watch".
func TestServiceMovedPortIsReportedAndReachable(t *testing.T) {
	fake := fake2.New(map[string]fakeopencode.Spec{"b": {Status: "failed", AfterConnect: "connected"}})
	fake.SetHeartbeat(time.Second)
	a := httptest.NewServer(fake)
	var mu sync.Mutex
	current := a.URL
	discover := func(context.Context) (string, string, error) {
		mu.Lock()
		defer mu.Unlock()
		return current, fake2.DefaultPassword, nil
	}
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{{URL: a.URL, Discover: discover, ServiceFile: "/svc.json"}},
			StatusAddr: "127.0.0.1:0", Registry: reg, Engine: fastConfig(), NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true,
			Ready: func(s string) { ready <- s }}, slog.New(slog.DiscardHandler))
	}()
	addr := <-ready
	var b *httptest.Server
	defer func() {
		cancel()
		<-done
		a.Close()
		if b != nil {
			b.Close()
		}
	}()
	waitFor(t, func() bool { return fake.Subscribers() == 1 })

	// The service restarts on another port.
	a.CloseClientConnections()
	a.Close()
	b = httptest.NewServer(fake)
	mu.Lock()
	current = b.URL
	mu.Unlock()
	waitFor(t, func() bool { return fake.Subscribers() == 1 })

	st, err := (&statusapi.Client{Addr: addr}).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 1 || st.Servers[0].URL != b.URL {
		t.Errorf("status names %q after the service moved to %s", st.Servers[0].URL, b.URL)
	}
	// The entry is rewritten when the stream's first event arrives, a
	// moment after the subscription.
	var ents []registry.Entry
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, _ = reg.List()
		if len(ents) != 1 {
			t.Fatalf("registry: %+v", ents)
		}
		if ents[0].Watches(b.URL) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry still says %v after the service moved to %s: `reconnect --url` would not find this daemon", ents[0].URLs, b.URL)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, err = (&statusapi.Client{Addr: addr, Token: ents[0].Token}).Reconnect(context.Background(), statusapi.ReconnectRequest{URL: b.URL, Directory: "/p"})
	if err != nil {
		t.Errorf("reconnect --url %s (where the service now is): %v", b.URL, err)
	}
}

// previewFile is the v2 preview build's service file: its channel "v2",
// hashed (service-config.ts: service-<Hash.fast(channel)>.json).
const previewFile = "service-a1047eab1035d58682a53557e0b2a75edbfd15fd.json"

// followService is ServiceServer with every request (the service files'
// verification and the server's own) through rt.
func followService(file string, channels bool, fallback *Target, rt http.RoundTripper) Target {
	sc := ServiceServer(file, channels, fallback)
	sc.Transport, sc.follow.opts.Transport = rt, rt
	return sc
}

// logBuffer is a log destination safe for concurrent writers.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// registerService writes a service file as OpenCode 2 does, written at
// when (the file's mtime: the fake clock of a bubble is not the file
// system's).
func registerService(t *testing.T, path, url, version string, pid int, password string, when time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	b := fmt.Sprintf(`{"id":"x","version":%q,"url":%q,"pid":%d,"password":%q}`, version, url, pid, password)
	if err := os.WriteFile(path, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}

// runFollowing runs the daemon on sc until the test ends.
func runFollowing(t *testing.T, sc Target, log *slog.Logger) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{sc}, Registry: &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")},
			Engine: fastConfig(), NoProbes: true, NoNetwatch: true, NoProcessView: true, NoToasts: true}, log)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// A zero-config watch started at login, long before OpenCode 2's
// service, follows a service of a channel other than latest that starts
// later (the v2 preview build: service-a1047eab….json, detected through
// /api/health), within one look (≤ 5 s, jittered ≤ 6 s) of its file
// appearing; it says which file it follows in its log and in status.
func TestServiceOfAHashedChannelThatStartsLaterIsFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "opencode")
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		sc := followService(filepath.Join(dir, "service.json"), true, &Target{URL: "http://127.0.0.1:4096", Username: "opencode"}, hosts.Transport())
		logs := &logBuffer{}
		runFollowing(t, sc, slog.New(slog.NewTextHandler(logs, nil)))

		time.Sleep(90 * time.Second) // the login, then nothing for a while
		synctest.Wait()
		svc := fake2.New(nil)
		const host = "127.0.0.1:36347"
		hosts.Serve(host, svc)
		file := filepath.Join(dir, previewFile)
		registerService(t, file, "http://"+host, fake2.DefaultVersion, fake2.DefaultPID, fake2.DefaultPassword, time.Now())
		wrote := time.Now()
		for svc.Subscribers() == 0 {
			if time.Since(wrote) > 6*time.Second {
				t.Fatalf("not subscribed to the service of %s %v after it registered:\n%s", previewFile, time.Since(wrote), logs)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("followed %v after the file appeared", time.Since(wrote))
		synctest.Wait()
		want := fmt.Sprintf(`msg="following the OpenCode 2 service" file=%s url=http://%s pid=%d`, file, host, fake2.DefaultPID)
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say which service it follows (%s):\n%s", want, logs)
		}
		if got := (&watched{follow: sc.follow}).Service(); got == nil || got.File != file || got.PID != fake2.DefaultPID || len(got.AlsoRegistered) != 0 {
			t.Errorf("status shows the service %+v, want %s pid %d", got, file, fake2.DefaultPID)
		}
		if strings.Contains(logs.String(), fake2.DefaultPassword) {
			t.Error("the service's password reached the log")
		}
	})
}

// While the daemon watches the 1.x fallback (OpenCode 1.x at :4096,
// answering), a service that starts later is followed all the same,
// within one servicePoll of its file appearing, as it would have been at
// start: the fallback's stream ends, its directories are forgotten (the
// service is another server: none is read there until it is used), and
// the service's stream is the one followed from then on.
func TestServiceThatStartsWhileTheFallbackIsWatchedIsFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "opencode")
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		v1 := fakeopencode.New(map[string]fakeopencode.Spec{"s": {}})
		hosts.Serve("127.0.0.1:4096", v1)
		sc := followService(filepath.Join(dir, "service.json"), true, &Target{URL: "http://127.0.0.1:4096", Username: "opencode"}, hosts.Transport())
		logs := &logBuffer{}
		runFollowing(t, sc, slog.New(slog.NewTextHandler(logs, nil)))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if v1.Subscribers() != 1 || !strings.Contains(logs.String(), "watching OpenCode at the fallback address") {
			t.Fatalf("setup: the 1.x fallback is not watched (%d subscribers):\n%s", v1.Subscribers(), logs)
		}
		v1.Publish("/p", "session.updated", map[string]any{"info": map[string]any{"id": "ses_1"}})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if v1.Count("/mcp", "/p", "") == 0 {
			t.Fatalf("setup: /p was not armed in 1.x:\n%s", logs)
		}

		time.Sleep(time.Minute)
		svc := fake2.New(map[string]fakeopencode.Spec{"s": {}})
		const host = "127.0.0.1:20147"
		hosts.Serve(host, svc)
		file := filepath.Join(dir, "service-beta.json")
		registerService(t, file, "http://"+host, fake2.DefaultVersion, fake2.DefaultPID, fake2.DefaultPassword, time.Now())
		wrote := time.Now()
		for svc.Subscribers() == 0 {
			if time.Since(wrote) > servicePoll+time.Second {
				t.Fatalf("still on the fallback %v after the service registered:\n%s", time.Since(wrote), logs)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := v1.Subscribers(); n != 0 {
			t.Errorf("the fallback's stream is still subscribed (%d) beside the service's", n)
		}
		if n := svc.Count(fake2.RouteMCP, "/p", ""); n != 0 {
			t.Errorf("the service got %d status reads of /p, a directory armed only in 1.x", n)
		}
		if got := (&watched{follow: sc.follow}).Service(); got == nil || got.File != file {
			t.Errorf("status shows the service %+v, want %s", got, file)
		}
		if !strings.Contains(logs.String(), `msg="following the OpenCode 2 service" file=`+file) {
			t.Errorf("the log does not say it follows %s:\n%s", file, logs)
		}
	})
}

// Of several service files, a daemon choosing follows service.json when
// its service answers, else the newest file whose service answers (the
// service started last), and names the others that answer in its log
// and in status; one that does not answer is passed over.
func TestOfSeveralServicesTheOneFollowedIsNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "opencode")
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		serve := func(host string, pid int) {
			svc := fake2.New(nil)
			svc.SetPID(pid)
			hosts.Serve(host, svc)
		}
		serve("127.0.0.1:1001", 1001)
		serve("127.0.0.1:1002", 1002)
		serve("127.0.0.1:1003", 1003)
		now := time.Now()
		latest := filepath.Join(dir, "service.json")
		older := filepath.Join(dir, "service-beta.json")
		newer := filepath.Join(dir, previewFile)
		registerService(t, older, "http://127.0.0.1:1002", fake2.DefaultVersion, 1002, fake2.DefaultPassword, now.Add(-time.Hour))
		registerService(t, newer, "http://127.0.0.1:1003", fake2.DefaultVersion, 1003, fake2.DefaultPassword, now.Add(-time.Minute))
		registerService(t, filepath.Join(dir, "service-local.json"), "http://127.0.0.1:1009", fake2.DefaultVersion, 1009, fake2.DefaultPassword, now)

		logs := &logBuffer{}
		sc := followService(latest, true, nil, hosts.Transport())
		sc.follow.log = slog.New(slog.NewTextHandler(logs, nil))
		ctx := context.Background()

		url, _, err := sc.Discover(ctx)
		if err != nil || url != "http://127.0.0.1:1003" {
			t.Fatalf("without service.json: %q, %v; want the newest that answers (%s)", url, err, newer)
		}
		if got := (&watched{follow: sc.follow}).Service(); got == nil || got.File != newer || fmt.Sprint(got.AlsoRegistered) != fmt.Sprint([]string{older}) {
			t.Errorf("status %+v, want %s and also %s (service-local.json does not answer)", got, newer, older)
		}
		if want := fmt.Sprintf(`file=%s url=http://127.0.0.1:1003 pid=1003 version=%s also_registered=[%s]`, newer, fake2.DefaultVersion, older); !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}

		registerService(t, latest, "http://127.0.0.1:1001", fake2.DefaultVersion, 1001, fake2.DefaultPassword, now.Add(-24*time.Hour))
		sc = followService(latest, true, nil, hosts.Transport()) // a daemon that chooses afresh
		if url, _, err := sc.Discover(ctx); err != nil || url != "http://127.0.0.1:1001" {
			t.Fatalf("with service.json: %q, %v; want service.json's, however old", url, err)
		}
		if got := (&watched{follow: sc.follow}).Service(); got == nil || got.File != latest || len(got.AlsoRegistered) != 2 {
			t.Errorf("status %+v, want %s and the two others", got, latest)
		}
	})
}

// A service file whose service does not answer costs one request: it is
// asked again only when it changes (the service started again), while
// the pid it registers runs, or while it is young (a service still
// starting); else each look is one ReadDir and one small read.
func TestAStaleServiceFileIsNotAskedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "opencode")
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		var asked atomic.Int32
		// The port the file names is another program's now.
		hosts.Serve("127.0.0.1:1005", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked.Add(1)
			http.NotFound(w, r)
		}))
		file := filepath.Join(dir, previewFile)
		registerService(t, file, "http://127.0.0.1:1005", fake2.DefaultVersion, 1005, fake2.DefaultPassword, time.Now().Add(-time.Hour))
		sc := followService(filepath.Join(dir, "service.json"), true, nil, hosts.Transport())
		var alive atomic.Bool
		sc.follow.alive = func(int) bool { return alive.Load() }
		look := func() int32 {
			before := asked.Load()
			if _, _, err := sc.Discover(context.Background()); err == nil {
				t.Fatal("a stale file was followed")
			}
			return asked.Load() - before
		}
		if n := look(); n == 0 {
			t.Fatal("setup: the file was not asked at all")
		}
		for range 5 {
			if n := look(); n != 0 {
				t.Fatalf("an unchanged stale file whose pid is gone was asked again (%d requests)", n)
			}
		}
		alive.Store(true)
		if n := look(); n == 0 {
			t.Error("a file whose pid runs was not asked again")
		}
		alive.Store(false)
		registerService(t, file, "http://127.0.0.1:1005", fake2.DefaultVersion, 1006, fake2.DefaultPassword, time.Now().Add(-time.Hour+time.Second))
		if n := look(); n == 0 {
			t.Error("a rewritten file was not asked again")
		}
		if n := look(); n != 0 {
			t.Errorf("asked again without a change (%d requests)", n)
		}
		registerService(t, file, "http://127.0.0.1:1005", fake2.DefaultVersion, 1006, fake2.DefaultPassword, time.Now())
		if look() == 0 || look() == 0 {
			t.Error("a young file (its service may still be starting) was not asked at every look")
		}
	})
}

// A daemon keeps following the service it follows while that one still
// answers: a hiccup of its event stream (every re-subscribe looks at the
// service files again) must not move it to another channel's service
// that answers too, even service.json's; it moves only when the one it
// follows is gone.
func TestTheFollowedServiceIsKeptWhileItAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "opencode")
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		for _, pid := range []int{1001, 1002, 1003} {
			svc := fake2.New(nil)
			svc.SetPID(pid)
			hosts.Serve(fmt.Sprintf("127.0.0.1:%d", pid), svc)
		}
		now := time.Now()
		latest := filepath.Join(dir, "service.json")
		followed := filepath.Join(dir, "service-beta.json")
		registerService(t, followed, "http://127.0.0.1:1002", fake2.DefaultVersion, 1002, fake2.DefaultPassword, now.Add(-time.Hour))
		sc := followService(latest, true, nil, hosts.Transport())
		ctx := context.Background()
		if url, _, err := sc.Discover(ctx); err != nil || url != "http://127.0.0.1:1002" {
			t.Fatalf("setup: %q, %v; want %s's service", url, err, followed)
		}
		// Later, service.json's service and a newer channel's start too.
		registerService(t, latest, "http://127.0.0.1:1001", fake2.DefaultVersion, 1001, fake2.DefaultPassword, now)
		registerService(t, filepath.Join(dir, previewFile), "http://127.0.0.1:1003", fake2.DefaultVersion, 1003, fake2.DefaultPassword, now)
		for range 3 { // re-subscribes after hiccups
			if url, _, err := sc.Discover(ctx); err != nil || url != "http://127.0.0.1:1002" {
				t.Fatalf("after a hiccup: %q, %v; want the service it follows, which still answers", url, err)
			}
		}
		if got := (&watched{follow: sc.follow}).Service(); got == nil || got.File != followed {
			t.Errorf("status %+v, want %s", got, followed)
		}
		hosts.Stop("127.0.0.1:1002") // the followed service is gone
		if url, _, err := sc.Discover(ctx); err != nil || url != "http://127.0.0.1:1001" {
			t.Fatalf("once it is gone: %q, %v; want service.json's", url, err)
		}
	})
}

// A stale service.json whose port another OpenCode now holds (it refuses
// the file's password) does not end the search: the next file whose
// service answers is followed. A refused password is the answer only
// when no file's service answers.
func TestAServiceFileWhosePasswordIsRefusedDoesNotEndTheSearch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "opencode")
		hosts := fakeopencode.NewHosts()
		defer hosts.Close()
		other := fake2.New(nil)
		other.SetPassword("not-the-files")
		hosts.Serve("127.0.0.1:1001", other)
		live := fake2.New(nil)
		live.SetPID(1002)
		hosts.Serve("127.0.0.1:1002", live)
		now := time.Now()
		latest := filepath.Join(dir, "service.json")
		registerService(t, latest, "http://127.0.0.1:1001", fake2.DefaultVersion, 1001, fake2.DefaultPassword, now.Add(-time.Hour))
		registerService(t, filepath.Join(dir, "service-beta.json"), "http://127.0.0.1:1002", fake2.DefaultVersion, 1002, fake2.DefaultPassword, now)
		sc := followService(latest, true, nil, hosts.Transport())
		if url, _, err := sc.Discover(context.Background()); err != nil || url != "http://127.0.0.1:1002" {
			t.Fatalf("%q, %v; want the next file's service, which answers", url, err)
		}
		hosts.Stop("127.0.0.1:1002")
		sc = followService(latest, true, nil, hosts.Transport())
		if _, _, err := sc.Discover(context.Background()); !errors.Is(err, opencode.ErrUnauthorized) {
			t.Fatalf("with only the refusing one answering: %v, want unauthorized", err)
		}
	})
}

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

// Rule 8 ("whatever sees a refusal or a new
// process ... forgets the armed directories at once"), for the OpenCode 2
// background service, the way most 2.x users run it. A service that exits
// cleanly removes its service.json; from then on the event stream's every
// look is Discover failing with fs.ErrNotExist, which Server.Detect returns
// without a request to the known URL and observe() ignores (neither an
// answer nor a refusal). So no Gone reaches the engine for the whole gap,
// although the service's port refuses connections: a directory whose idle
// check falls after the next service listens on the same port (49374 is
// fixed), before the stream's next look (up to 5 s later), reads the new
// process and boots its location, and every MCP server it configures, for
// a directory nobody uses. A service file that is gone is the strongest
// "gone" there is.
func TestServiceCleanExitForgetsDirectories(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		saved := followRetry
		followRetry = backoff.Policy{Initial: 500 * time.Millisecond, Max: 5 * time.Second} // no jitter: a fixed schedule
		defer func() { followRetry = saved }()

		file := filepath.Join(t.TempDir(), "opencode", "service.json")
		specs := map[string]fakeopencode.Spec{"s": {}}
		hosts := fakeopencode.NewHosts()
		old := fake2.New(specs)
		old.SetHeartbeat(10 * time.Second)
		hosts.Serve(host2, old)
		writeServiceJSON(t, file, "http://"+host2, old.PID, fake2.DefaultPassword)

		ec := reconnect.DefaultConfig
		ec.Backoff.Jitter = 0
		ec.IdleInterval = 10 * time.Minute
		cfg := Config{
			// ServiceServer, through the in-memory hosts.
			Servers: []Target{followService(file, false, nil, hosts.Transport())},
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
		old.Boot("/p")
		old.Publish("/p", "session.created", map[string]any{"sessionID": "ses_1"}) // armed; checked at 2 and 3 s, next at 603 s
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if old.Count(fake2.RouteMCP, "/p", "") == 0 {
			t.Fatal("setup: /p was not checked in the old service")
		}

		// The service stops at 591 s (opencode service restart, or a newer
		// CLI replacing it): its port refuses from then on, and it removes
		// its service.json at the clean exit, as OpenCode 2 does.
		time.Sleep(start.Add(591 * time.Second).Sub(time.Now()))
		hosts.Stop(host2)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		// A new service listens on the same port at 602 s (the stream looks at 591, 591.5, 592.5, 594.5, 598.5, 603.5 s) and registers.
		time.Sleep(start.Add(602 * time.Second).Sub(time.Now()))
		fresh := fake2.New(specs)
		fresh.PID = old.PID + 1
		fresh.SetHeartbeat(10 * time.Second)
		hosts.Serve(host2, fresh)
		writeServiceJSON(t, file, "http://"+host2, fresh.PID, fake2.DefaultPassword)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := fresh.Count(fake2.RouteMCP, "/p", ""); n != 0 {
			t.Fatalf("the new service got %d status reads of /p (locations %v), armed only in the old one, although the old service had exited (file removed, port refusing) 11 s before",
				n, fresh.Instances())
		}
	})
}
