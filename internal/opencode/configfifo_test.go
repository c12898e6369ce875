//go:build unix

package opencode_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// Server kinds without /api/config (the config files
// OpenCode reads) and BRIEF ("every HTTP call has a timeout"; a parser of
// outside input must not hang the daemon). ReadMCPConfig os.Open()s each
// config file of a project directory whatever it is: a project whose
// opencode.json is a FIFO (a tarball can carry one; a symlink can point at
// one) blocks the open for ever. On the v2 preview build (no GET
// /api/config) this runs in the directory's loop (check → learnKinds →
// MCPConfig → configWithoutRoute): that loop never turns again, its check
// has next == 0 so Alive and the systemd watchdog still call it healthy,
// and the engine's Run waits for the loop at shutdown, so the daemon
// cannot stop. A config file that is not a regular file must be skipped
// without blocking.
func TestConfigFileFIFODoesNotHang(t *testing.T) {
	t.Setenv("OPENCODE_CONFIG_DIR", t.TempDir())
	t.Setenv("OPENCODE_CONFIG", "")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "opencode.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan map[string]opencode.MCPEntry, 1)
	go func() {
		cfg, _ := opencode.ReadMCPConfig(dir, opencode.OwnConfigEnv(opencode.V2))
		done <- cfg
	}()
	select {
	case <-done:
		return
	case <-time.After(2 * time.Second):
	}
	// Unblock the reader so the goroutine ends (goleak), then fail.
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		_ = w.Close()
	}
	<-done
	t.Fatalf("ReadMCPConfig(%s) blocked for 2 s opening the FIFO %s: a project's opencode.json that is a FIFO hangs the directory's loop (and shutdown) for ever", dir, fifo)
}
