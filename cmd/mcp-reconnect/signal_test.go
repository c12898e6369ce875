package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

// syncBuffer is a bytes.Buffer the daemon's logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The whole command: watch with two [[opencode]] tables, each with its
// password file, and $OPENCODE_SERVER_PASSWORD exported, watches both
// servers (each accepts only its own password). SIGTERM ends it with one
// info line that names the signal. The variable's value is never printed.
func TestWatchWithTablesAndTheVariableExportedStopsOnSIGTERMWithALine(t *testing.T) {
	const ambient = "ambient-secret"
	t.Setenv("OPENCODE_SERVER_PASSWORD", ambient)
	var cfg strings.Builder
	for _, pw := range []string{"one-secret", "two-secret"} {
		fake := fakeopencode.New(map[string]fakeopencode.Spec{"docs": {Status: "connected"}})
		fake.Password = pw
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		cfg.WriteString("[[opencode]]\nurl = \"" + srv.URL + "\"\npassword-file = \"" + passwordFile(t, pw) + "\"\n")
	}
	var out, errOut syncBuffer
	root := newRoot(&out, &errOut)
	root.SetArgs([]string{"watch", "--config", writeConfig(t, cfg.String()), "--status-addr", "", "--netwatch=false", "--probe=false"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(context.Background()) }()

	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(errOut.String(), `msg="watching opencode"`) < 2 {
		select {
		case err := <-done:
			t.Fatalf("watch ended: %v\n%s", err, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch did not watch both servers:\n%s", errOut.String())
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("watch did not stop on SIGTERM:\n%s", errOut.String())
	}
	log := errOut.String()
	if n := strings.Count(log, "signal=SIGTERM"); n != 1 || !strings.Contains(log, `level=INFO msg="stopping: signal received" signal=SIGTERM`) {
		t.Errorf("want one info line naming SIGTERM, got:\n%s", log)
	}
	if strings.Count(log, "OPENCODE_SERVER_PASSWORD is set but not used") != 1 {
		t.Errorf("want the variable's line once:\n%s", log)
	}
	// A refused password is logged as "answered 401" (a bare "401" would
	// also match a port such as :40107).
	if strings.Contains(log+out.String(), ambient) || strings.Contains(log, "answered 401") {
		t.Errorf("the variable's value was printed, or sent:\n%s", log)
	}
}

// stopOnSignal's goroutine ends with stop, whether a signal came or the
// parent ended first.
func TestStopOnSignalLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	_, stop := stopOnSignal(context.Background(), slog.New(slog.DiscardHandler))
	stop()
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := stopOnSignal(parent, slog.New(slog.DiscardHandler))
	cancel()
	<-ctx.Done()
	stop()
}
