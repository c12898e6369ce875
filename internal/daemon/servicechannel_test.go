package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

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
