package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/internal/statusapi"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// TestMain keeps the daemons these tests run out of the user's registry.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpr-daemon-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

func fastConfig() reconnect.Config {
	c := reconnect.DefaultConfig
	c.Backoff.Initial = 10 * time.Millisecond
	c.Backoff.Max = 50 * time.Millisecond
	return c
}

// The assembled daemon arms, recovers a crash, serves its API, keeps
// secrets out of its logs and stops cleanly (goleak checks the last).
func TestRunRecoversAndStops(t *testing.T) {
	fake := fakeopencode.New(map[string]fakeopencode.Spec{
		"remote": {Type: "remote", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer header-secret"}},
		"local":  {},
	})
	fake.Password = "pw-secret"
	fake.SetHeartbeat(time.Second)
	hs := httptest.NewServer(fake)
	defer hs.Close()
	var logs ochost.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{{URL: hs.URL, Password: "pw-secret"}}, StatusAddr: "127.0.0.1:0", Engine: fastConfig(),
			Directories: []string{"/p/one"}, Ready: func(a string) { ready <- a }}, log)
	}()
	addr := <-ready
	waitFor(t, func() bool { return fake.Subscribers() == 1 && fake.Count("/mcp", "/p/one", "") > 0 })
	fake.SetAfterConnect("/p/one", "local", "connected")
	fake.SetAfterConnect("/p/one", "remote", "connected")
	fake.SetStatus("/p/one", "remote", "failed", "Connection closed")
	fake.Crash("/p/one", "local")
	waitFor(t, func() bool { return strings.Count(logs.String(), "reconnected MCP server") == 2 })

	// Each comeback is announced in the TUI, naming no directory (which
	// would create an instance).
	waitFor(t, func() bool { return len(fake.Toasts()) == 2 })
	for _, q := range fake.Requests() {
		if q.Route == "/tui/show-toast" && q.Directory != "" {
			t.Fatalf("a toast named directory %q", q.Directory)
		}
	}
	if msg, _ := fake.Toasts()[0]["message"].(string); !strings.Contains(msg, "reconnected") {
		t.Fatalf("toast = %+v", fake.Toasts()[0])
	}

	c := &statusapi.Client{Addr: addr}
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Servers[0].Directories; len(d) != 1 || d[0].ArmedBy != "--directory" {
		t.Fatalf("status directories = %+v", d)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for _, secret := range []string{"pw-secret", "header-secret"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("a secret (%s) reached the logs", secret)
		}
	}
}

func TestRunRefusesWrongPasswordClearly(t *testing.T) {
	fake := fakeopencode.New(nil)
	fake.Password = "right"
	hs := httptest.NewServer(fake)
	defer hs.Close()
	err := Run(context.Background(), Config{Servers: []Target{{URL: hs.URL, Password: "wrong-pw"}}, Engine: reconnect.DefaultConfig}, slog.New(slog.DiscardHandler))
	if !errors.Is(err, opencode.ErrUnauthorized) || !strings.Contains(err.Error(), "OPENCODE_SERVER_PASSWORD") || strings.Contains(err.Error(), "wrong-pw") {
		t.Fatalf("err = %v", err)
	}
	// Detection asks 2.x's /api/info, then 1.x's /global/health: two
	// refused requests, then the daemon stops.
	if n := fake.Count("401", "", ""); n != 2 {
		t.Fatalf("%d refused requests, want 2", n)
	}
}

func TestRunRejectsPublicStatusAddr(t *testing.T) {
	err := Run(context.Background(), Config{Servers: []Target{{URL: "http://127.0.0.1:1"}}, StatusAddr: "0.0.0.0:4097", Engine: reconnect.DefaultConfig}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "--status-public") {
		t.Fatalf("err = %v", err)
	}
}

// An OpenCode that is not up yet is waited for, not fatal.
func TestRunWaitsForOpenCode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var logs ochost.Buffer
	err := Run(ctx, Config{Servers: []Target{{URL: "http://127.0.0.1:1"}}, Engine: reconnect.DefaultConfig}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("Run = %v, want nil after the context ends", err)
	}
	if !strings.Contains(logs.String(), "waiting for it") {
		t.Fatalf("logs = %s", logs.String())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The daemon registers its status address and token while it runs (0600
// in 0700), the token drives POST /reconnect and nothing else does, the
// token never reaches the logs or /status, and the file is gone on exit.
func TestRunRegistersAndUnregisters(t *testing.T) {
	fake := fakeopencode.New(map[string]fakeopencode.Spec{"local": {}})
	fake.SetHeartbeat(time.Second)
	hs := httptest.NewServer(fake)
	defer hs.Close()
	reg := &registry.Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	var logs ochost.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before hs.Close, which waits for the daemon's event stream
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Servers: []Target{{URL: hs.URL}}, StatusAddr: "127.0.0.1:0", Engine: fastConfig(), Registry: reg, Version: "vtest",
			Ready: func(a string) { ready <- a }}, log)
	}()
	addr := <-ready
	ents, err := reg.List()
	if err != nil || len(ents) != 1 {
		t.Fatalf("registry = %+v, %v", ents, err)
	}
	e := ents[0]
	if e.PID != os.Getpid() || e.StatusAddr != addr || len(e.URLs) != 1 || e.URLs[0] != hs.URL || len(e.Token) < 32 || e.Version != "vtest" || e.Started.IsZero() {
		t.Fatalf("entry = %+v", e)
	}
	for path, want := range map[string]os.FileMode{reg.Dir: 0o700, filepath.Join(reg.Dir, strconv.Itoa(e.PID)+".json"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %v", path, fi, err, want)
		}
	}
	if _, err := (&statusapi.Client{Addr: addr}).Reconnect(context.Background(), statusapi.ReconnectRequest{Directory: "/p/x"}); err == nil {
		t.Fatal("a reconnect without the token was accepted")
	}
	// Ready comes before the engine runs: retry until it takes the request.
	var rerr error
	waitFor(t, func() bool {
		_, rerr = (&statusapi.Client{Addr: addr, Token: e.Token}).Reconnect(context.Background(), statusapi.ReconnectRequest{Directory: "/p/x"})
		return rerr == nil || !strings.Contains(rerr.Error(), "engine not running")
	})
	if rerr != nil {
		t.Fatalf("with the registry's token: %v", rerr)
	}
	waitFor(t, func() bool { return fake.Count("/mcp", "/p/x", "") > 0 })
	st, err := (&statusapi.Client{Addr: addr}).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(st); strings.Contains(string(b), e.Token) {
		t.Fatal("/status shows the token")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ents, _ := reg.List(); len(ents) != 0 {
		t.Fatalf("still registered after exit: %+v", ents)
	}
	if strings.Contains(logs.String(), e.Token) {
		t.Fatal("the token reached the logs")
	}
}
