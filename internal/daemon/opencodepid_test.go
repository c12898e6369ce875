//go:build linux

package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// standIn is an "OpenCode process": a sleep that holds the listening
// socket of a fake OpenCode this test serves (so that /proc shows it
// listening on the fake's port), or none.
type standIn struct {
	cmd *exec.Cmd
	url string
}

func startStandIn(t *testing.T, h http.Handler) *standIn {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	s := &standIn{cmd: cmd}
	var ln *net.TCPListener
	if h != nil {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln = l.(*net.TCPListener)
		f, err := ln.File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.ExtraFiles = []*os.File{f}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.end)
	if ln != nil {
		// Handing the socket to the child made it blocking (one open
		// file for both): the server's accept must not block a thread.
		rc, err := ln.SyscallConn()
		if err == nil {
			err = rc.Control(func(fd uintptr) { err = syscall.SetNonblock(int(fd), true) })
		}
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewUnstartedServer(h)
		hs.Listener = ln
		hs.Start()
		t.Cleanup(hs.Close)
		s.url = hs.URL
	}
	return s
}

// end ends the process as a kill -9 does.
func (s *standIn) end() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func (s *standIn) pid() int { return s.cmd.Process.Pid }

// runFor runs RunFor in the background, logging to logs; the returned
// channel gives its result.
func runFor(t *testing.T, cfg Config, oc OpenCodeProcess, logs *ochost.Buffer) (<-chan error, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { done <- RunFor(ctx, cfg, oc, log) }()
	return done, cancel
}

func fakeOpenCode() *fakeopencode.Server {
	fake := fakeopencode.New(map[string]fakeopencode.Spec{"local": {}})
	fake.SetHeartbeat(time.Second)
	return fake
}

// registered waits until reg holds exactly one daemon and returns it.
func registered(t *testing.T, reg *registry.Registry, done <-chan error, logs *ochost.Buffer) registry.Entry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ents, _ := reg.List(); len(ents) == 1 {
			return ents[0]
		}
		select {
		case err := <-done:
			t.Fatalf("RunFor ended before it registered: %v\n%s", err, logs)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon registered within 10 s\n%s", logs)
		}
	}
}

// ended waits for RunFor's result, which must come within d.
func ended(t *testing.T, done <-chan error, d time.Duration, logs *ochost.Buffer) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("RunFor still runs %v later\n%s", d, logs)
		return nil
	}
}

// A daemon for an OpenCode process watches the server that process
// listens on: at the URL it was given (the 1.x plugin's), or, given
// none, at the port the process listens on (the 2.x plugin's). It ends,
// cleanly and within a second, when that process is killed, and takes a
// free status port when its own is taken.
func TestRunForWatchesTheServerOfItsProcessUntilItEnds(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, given := range []bool{true, false} {
		t.Run("url given "+strconv.FormatBool(given), func(t *testing.T) {
			fake := fakeOpenCode()
			oc := startStandIn(t, fake)
			reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
			p := OpenCodeProcess{PID: oc.pid(), ServiceFile: filepath.Join(t.TempDir(), "service.json")}
			if given {
				p.Server.URL = strings.Replace(oc.url, "127.0.0.1", "localhost", 1) + "/"
			}
			var logs ochost.Buffer
			done, _ := runFor(t, Config{StatusAddr: taken.Addr().String(), StatusAddrFallback: true, Registry: reg, Engine: fastConfig()}, p, &logs)
			e := registered(t, reg, done, &logs)
			if !e.Watches(oc.url) || e.StatusAddr == taken.Addr().String() || e.Service != "" {
				t.Errorf("registered %+v, want a daemon watching %s on another status port", e, oc.url)
			}
			waitFor(t, func() bool { return len(fake.Requests()) > 0 })

			oc.end()
			start := time.Now()
			if err := ended(t, done, 5*time.Second, &logs); err != nil {
				t.Fatalf("RunFor = %v after its OpenCode ended, want nil\n%s", err, &logs)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("RunFor took %v to end after its OpenCode did", took)
			}
			if !strings.Contains(logs.String(), "opencode ended; stopping") {
				t.Errorf("no line says why the daemon stopped:\n%s", &logs)
			}
			if ents, _ := reg.List(); len(ents) != 0 {
				t.Errorf("still registered: %+v", ents)
			}
		})
	}
}

// The OpenCode 2 background service is found from its process through
// the service file that names it (another channel's too), whose
// password the daemon then uses; a file naming another process is not
// taken.
func TestOpenCodeProcessFoundThroughItsServiceFile(t *testing.T) {
	oc := startStandIn(t, nil)
	dir := t.TempDir()
	write := func(name string, pid int) string {
		p := filepath.Join(dir, name)
		b := `{"id":"x","version":"2.1.2","url":"http://127.0.0.1:49374","pid":` + strconv.Itoa(pid) + `,"password":"pw"}`
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("service.json", os.Getpid())
	mine := write("service-local.json", oc.pid())
	p := OpenCodeProcess{PID: oc.pid(), ServiceFile: filepath.Join(dir, "service.json"), Channels: true}
	sc, err := p.find(context.Background())
	if err != nil || sc.ServiceFile != mine || sc.Discover == nil || sc.PID != oc.pid() {
		t.Fatalf("find = %+v, %v; want the service of %s", sc, err, mine)
	}
	p.Channels = false
	defer func(d time.Duration) { findFor = d }(findFor)
	findFor = 300 * time.Millisecond
	if sc, err := p.find(context.Background()); err == nil {
		t.Fatalf("find without the other channels = %+v, want no server: service.json names another process", sc)
	}
}

// A process that serves nothing (a 1.x TUI started without --port,
// whose plugin is told http://localhost:4096/ all the same) is given up
// on with an error that says so, and the URL it was given is not
// watched: another OpenCode may answer there.
func TestOpenCodeProcessThatServesNothingIsNotWatched(t *testing.T) {
	other := startStandIn(t, fakeOpenCode()) // the OpenCode that does listen there
	oc := startStandIn(t, nil)
	defer func(d time.Duration) { findFor = d }(findFor)
	findFor = 300 * time.Millisecond
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	p := OpenCodeProcess{PID: oc.pid(), Server: Target{URL: other.url}, ServiceFile: filepath.Join(t.TempDir(), "service.json")}
	var logs ochost.Buffer
	done, _ := runFor(t, Config{StatusAddr: "127.0.0.1:0", Registry: reg, Engine: fastConfig()}, p, &logs)
	err := ended(t, done, 5*time.Second, &logs)
	if err == nil || !strings.Contains(err.Error(), "does not listen on "+other.url) || !strings.Contains(err.Error(), "started without --port") {
		t.Fatalf("RunFor = %v, want an error saying the process serves nothing", err)
	}
	if ents, _ := reg.List(); len(ents) != 0 {
		t.Errorf("registered %+v", ents)
	}
	if _, err := (OpenCodeProcess{PID: 1 << 30}).find(context.Background()); err == nil {
		t.Error("find for no process found a server")
	}
	if _, _, err := untilExit(context.Background(), 1<<30); err == nil {
		t.Error("untilExit of no process: no error")
	}
}

// OpenCode restarted on its port starts its daemon while the previous
// OpenCode's daemon may still be registered: the new one waits for that
// one to end, then watches. A daemon that does not end (one the user
// runs for that server) keeps it, and the new one is refused.
func TestRunForWaitsForThePreviousDaemonOfItsServer(t *testing.T) {
	defer func(d time.Duration) { dupWait = d }(dupWait)
	dupWait = 3 * time.Second
	fake := fakeOpenCode()
	oc := startStandIn(t, fake)
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	prev := exec.Command("sleep", "60")
	if err := prev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = prev.Process.Kill(); _ = prev.Wait() }()
	if _, err := reg.Register(registry.Entry{PID: prev.Process.Pid, URLs: []string{oc.url}, StatusAddr: "127.0.0.1:1", Token: "t"}); err != nil {
		t.Fatal(err)
	}
	p := OpenCodeProcess{PID: oc.pid(), Server: Target{URL: oc.url}}
	var logs ochost.Buffer
	done, cancel := runFor(t, Config{StatusAddr: "127.0.0.1:0", Registry: reg, Engine: fastConfig()}, p, &logs)
	waitFor(t, func() bool { return strings.Contains(logs.String(), "waiting for it to end") })
	_ = prev.Process.Kill()
	_ = prev.Wait()
	if e := registered(t, reg, done, &logs); e.PID != os.Getpid() {
		t.Fatalf("registered %+v, want this daemon", e)
	}
	cancel()
	if err := ended(t, done, 5*time.Second, &logs); err != nil {
		t.Fatal(err)
	}

	stays := otherDaemon(t, reg, "", oc.url)
	start := time.Now()
	done, _ = runFor(t, Config{StatusAddr: "127.0.0.1:0", Registry: reg, Engine: fastConfig()}, p, &logs)
	err := ended(t, done, 10*time.Second, &logs)
	var dup *DuplicateError
	if !errors.As(err, &dup) || dup.Running.PID != stays.PID {
		t.Fatalf("RunFor beside a daemon that stays = %v, want a *DuplicateError naming it", err)
	}
	if took := time.Since(start); took < dupWait {
		t.Errorf("refused after %v, before waiting %v for the other daemon", took, dupWait)
	}
}
