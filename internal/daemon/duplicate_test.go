package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

// otherDaemon registers a live process (a sleep standing in for another
// daemon) in reg as watching urls and following service.
func otherDaemon(t *testing.T, reg *registry.Registry, service string, urls ...string) registry.Entry {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	e := registry.Entry{PID: cmd.Process.Pid, URLs: urls, Service: service, StatusAddr: "127.0.0.1:4197", Token: "t", Started: time.Now()}
	remove, err := reg.Register(e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return e
}

// refusedRun runs a daemon that should refuse to start, bounded so that
// one that does start fails the test instead of hanging it.
func refusedRun(cfg Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return Run(ctx, cfg, slog.New(slog.DiscardHandler))
}

// A second daemon for an OpenCode server that a running daemon already
// watches (its URL spelt another way) refuses to start, naming the
// running one, before it makes any request to OpenCode; with
// AllowDuplicate it runs.
func TestSecondDaemonForOneServerIsRefused(t *testing.T) {
	fake := fakeopencode.New(nil)
	hs := httptest.NewServer(fake)
	defer hs.Close()
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	first := otherDaemon(t, reg, "", "http://127.0.0.1:9", strings.Replace(hs.URL, "http://", "HTTP://", 1)+"/")

	cfg := Config{Servers: []Target{{URL: hs.URL}}, StatusAddr: "127.0.0.1:0", Registry: reg, Engine: fastConfig()}
	err := refusedRun(cfg)
	var dup *DuplicateError
	if !errors.As(err, &dup) || dup.Running.PID != first.PID {
		t.Fatalf("Run = %v, want a *DuplicateError naming pid %d", err, first.PID)
	}
	for _, want := range []string{"pid " + strconv.Itoa(first.PID), "status api 127.0.0.1:4197", hs.URL, "--allow-duplicate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the refused daemon made %d requests to OpenCode", n)
	}
	// Without a status API (so never registered) it is refused all the same.
	cfg.StatusAddr = ""
	if err := refusedRun(cfg); !errors.As(err, &dup) {
		t.Fatalf("Run without a status API = %v", err)
	}

	cfg.StatusAddr, cfg.AllowDuplicate = "127.0.0.1:0", true
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	cfg.Ready = func(a string) { ready <- a }
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run with AllowDuplicate = %v", err)
	}
	all, _ := reg.List()
	if got := slices.DeleteFunc(all, func(e registry.Entry) bool { return !e.Watches(hs.URL) }); len(got) != 2 {
		t.Errorf("registered daemons for %s: %+v, want both", hs.URL, got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A daemon that follows the OpenCode 2 service file watches the service,
// wherever the file says it is now: a second daemon for the same file is
// refused, and so is one for the URL the file names. `run` does not start
// a daemon for a service that a daemon watches by URL.
func TestDaemonFollowingTheServiceFileWatchesTheService(t *testing.T) {
	dir := t.TempDir()
	reg := &registry.Registry{Dir: filepath.Join(dir, "daemons")}
	file := filepath.Join(dir, "service.json")
	if err := os.WriteFile(file, []byte(`{"id":"x","version":"2.0.21","url":"http://127.0.0.1:49374","pid":1,"password":"pw"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	first := otherDaemon(t, reg, file, "http://127.0.0.1:50000") // registered before the service moved
	cfg := Config{Servers: []Target{{URL: "http://127.0.0.1:49374", ServiceFile: filepath.Join(dir, ".", "service.json")}},
		Registry: reg, Engine: reconnect.DefaultConfig}
	var dup *DuplicateError
	if err := refusedRun(cfg); !errors.As(err, &dup) || dup.Running.PID != first.PID || !strings.Contains(err.Error(), "OpenCode 2 service") {
		t.Fatalf("Run for the same service file = %v", err)
	}

	reg2 := &registry.Registry{Dir: filepath.Join(dir, "daemons2")}
	byURL := otherDaemon(t, reg2, "", "http://127.0.0.1:49374")
	cfg.Registry = reg2
	if err := refusedRun(cfg); !errors.As(err, &dup) || dup.Running.PID != byURL.PID {
		t.Fatalf("Run for the service a daemon watches by URL = %v", err)
	}
	if _, _, ok, err := ServiceDaemon(reg2, file); !ok || err != nil {
		t.Fatalf("ServiceDaemon = %v, %v: a daemon watching the service's URL does not count", ok, err)
	}
}

// The check and the registration are one step under the registry's lock:
// of two daemons started at once for one server, the second sees the
// first. While registerUnique is between its check and its write, nobody
// else can take the lock.
func TestDuplicateCheckAndRegistrationAreAtomic(t *testing.T) {
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	held := false
	testHookChecked = func() {
		f, err := os.OpenFile(filepath.Join(reg.Dir, ".register.lock"), os.O_RDWR, 0)
		if err != nil {
			t.Errorf("lock file: %v", err)
			return
		}
		defer f.Close()
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		held = errors.Is(err, syscall.EWOULDBLOCK)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
	}
	defer func() { testHookChecked = nil }()
	e := registry.Entry{PID: os.Getpid(), URLs: []string{"http://127.0.0.1:4096"}, StatusAddr: "127.0.0.1:1", Token: "t"}
	remove, err := registerUnique(reg, e, false)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if !held {
		t.Fatal("the registry lock was free between the duplicate check and the write")
	}

	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	second := registry.Entry{PID: cmd.Process.Pid, URLs: []string{"http://localhost:4096/"}, StatusAddr: "127.0.0.1:2", Token: "u"}
	var dup *DuplicateError
	if _, err := registerUnique(reg, second, false); !errors.As(err, &dup) || dup.Running.PID != os.Getpid() {
		t.Fatalf("second registration = %v", err)
	}
}
