package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
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
