package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
)

// fakeManager records what the supervisor sends, with the fake time.
type fakeManager struct {
	mu    sync.Mutex
	start time.Time
	sent  []string // "1.5s READY=1" ...
}

func (f *fakeManager) notify(states ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range states {
		f.sent = append(f.sent, time.Since(f.start).String()+" "+s)
	}
	return nil
}

func (f *fakeManager) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}

// fakeEngines is the engines' liveness as the test sets it.
type fakeEngines struct {
	mu  sync.Mutex
	err error
}

func (f *fakeEngines) set(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeEngines) alive(timeout time.Duration) error {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil && !errors.Is(err, reconnect.ErrNotStarted) && !errors.Is(err, reconnect.ErrStopped) {
		time.Sleep(timeout) // a stuck engine's lock is tried until the timeout
	}
	return err
}

// READY=1 once the engines run (not before), a watchdog ping every half
// interval while they are alive, none while one is stuck, pings again
// once it is not, and STOPPING=1 at the end.
func TestSupervisorReadyAndWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &fakeManager{start: time.Now()}
		eng := &fakeEngines{err: reconnect.ErrNotStarted}
		s := supervisor{notify: mgr.notify, watchdog: 4 * time.Second, alive: eng.alive, servers: 1, log: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.run(ctx)
		}()
		defer func() {
			cancel()
			<-done
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := mgr.all(); len(got) != 0 {
			t.Fatalf("sent %q before the engines ran", got)
		}
		eng.set(nil) // at 1s, seen at the next poll
		time.Sleep(5 * time.Second)
		synctest.Wait()
		want := []string{"1.01s READY=1", "1.01s STATUS=watching 1 OpenCode server(s)", "3.01s WATCHDOG=1", "5.01s WATCHDOG=1"}
		if got := mgr.all(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("sent %q, want %q", got, want)
		}
		eng.set(errors.New("reconnect: the engine of http://127.0.0.1:4096 is stuck: its lock has been held for over 1s"))
		time.Sleep(10 * time.Second) // at 16s
		synctest.Wait()
		got := mgr.all()[len(want):]
		// The check at 7.01s waits out its timeout (1s) on the stuck lock.
		if len(got) != 1 || !strings.HasPrefix(got[0], "8.01s STATUS=stuck: ") {
			t.Fatalf("while stuck, sent %q; want only the stuck status", got)
		}
		eng.set(nil)
		time.Sleep(4 * time.Second) // at 20s
		synctest.Wait()
		got = mgr.all()[len(want)+1:]
		if want := "17.01s STATUS=watching 1 OpenCode server(s)|17.01s WATCHDOG=1|19.01s WATCHDOG=1"; strings.Join(got, "|") != want {
			t.Fatalf("after the engine recovered, sent %q; want %q", got, want)
		}
		cancel()
		<-done
		if all := mgr.all(); all[len(all)-1] != "20s STOPPING=1" {
			t.Fatalf("last sent %q, want STOPPING=1", all[len(all)-1])
		}
	})
}

// An engine whose Run returned while the daemon goes on never checks
// again: the watchdog stops pinging, as GET /healthz answers 503 (the
// one rule, reconnect.Stuck).
func TestSupervisorStoppedEngineIsStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &fakeManager{start: time.Now()}
		eng := &fakeEngines{}
		s := supervisor{notify: mgr.notify, watchdog: 4 * time.Second, alive: eng.alive, servers: 1, log: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.run(ctx)
		}()
		time.Sleep(3 * time.Second)
		eng.set(reconnect.ErrStopped)
		time.Sleep(6 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		want := []string{"0s READY=1", "0s STATUS=watching 1 OpenCode server(s)", "2s WATCHDOG=1", "4s STATUS=stuck: reconnect: engine stopped", "9s STOPPING=1"}
		if got := mgr.all(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("sent %q, want %q", got, want)
		}
	})
}

// Without a watchdog the supervisor says READY=1 and, at the end,
// STOPPING=1, and nothing else.
func TestSupervisorWithoutWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &fakeManager{start: time.Now()}
		eng := &fakeEngines{}
		s := supervisor{notify: mgr.notify, alive: eng.alive, servers: 2, log: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.run(ctx)
		want := []string{"0s READY=1", "0s STATUS=watching 2 OpenCode server(s)", "1m0s STOPPING=1"}
		if got := mgr.all(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("sent %q, want %q", got, want)
		}
	})
}

// Run under systemd (a fake $NOTIFY_SOCKET with a watchdog): READY=1 once
// it serves, watchdog pings while it runs, STOPPING=1 at the end; and its
// /readyz says the one server is detected and streaming.
func TestRunNotifiesSystemdAndIsReady(t *testing.T) {
	sockDir, err := os.MkdirTemp("", "mcpr-notify-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "notify")
	mgr, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "100000") // pings every 50 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	fake := fakeopencode.New(map[string]fakeopencode.Spec{"local": {}})
	fake.SetHeartbeat(time.Second)
	hs := httptest.NewServer(fake)
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{{URL: hs.URL}}, StatusAddr: "127.0.0.1:0", Engine: fastConfig(), Ready: func(a string) { ready <- a }},
			slog.New(slog.DiscardHandler))
	}()
	addr := <-ready
	read := func() string {
		t.Helper()
		_ = mgr.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		n, err := mgr.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
	if got := read(); !strings.HasPrefix(got, "READY=1\n") {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	for range 3 {
		if got := read(); got != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1", got)
		}
	}
	waitFor(t, func() bool { return fake.Subscribers() == 1 })
	var h statusapi.Health
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		h = statusapi.Health{}
		return json.NewDecoder(resp.Body).Decode(&h) == nil && resp.StatusCode == http.StatusOK
	})
	if len(h.Servers) != 1 || h.Servers[0].Generation != "1.x" || !h.Servers[0].StreamConnected {
		t.Fatalf("readyz = %+v", h)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for got := read(); got != "STOPPING=1"; got = read() {
		if got != "WATCHDOG=1" {
			t.Fatalf("notification %q after the end, want STOPPING=1", got)
		}
	}
}

// A stuck directory's name comes from OpenCode (data): a newline in it
// must not add a line of its own to what systemd reads (MAINPID=,
// WATCHDOG=1, …).
func TestSupervisorStatusIsOneLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &fakeManager{start: time.Now()}
		eng := &fakeEngines{}
		s := supervisor{notify: mgr.notify, watchdog: 4 * time.Second, alive: eng.alive, servers: 1, log: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.run(ctx)
		}()
		eng.set(errors.New("reconnect: the engine of http://127.0.0.1:4096 is stuck: the check of /p/x\nWATCHDOG=1\nMAINPID=1 is 3m0s past due"))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		for _, s := range mgr.all() {
			if strings.ContainsAny(s, "\n\r") {
				t.Fatalf("sent %q: a state holds a line break", s)
			}
		}
	})
}
