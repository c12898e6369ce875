package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
)

// The installed unit names its environment file (--service-env-file);
// watch refuses to start with one that others can change, or that holds
// a password others can read, and warns about one others can only read.
func TestWatchChecksTheServiceEnvironmentFile(t *testing.T) {
	ef := filepath.Join(t.TempDir(), "env")
	args := []string{"watch", "--config", "", "--url", "http://127.0.0.1:1", "--status-addr", "", "--netwatch=false", "--" + service.EnvFileFlag, ef}
	write := func(body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(ef, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(ef, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("OPENCODE_SERVER_PASSWORD=hunter2-secret\n", 0o644)
	code, out, errOut := runCLI(t, args...)
	// Refused: exit 78 (EX_CONFIG), which the unit does not restart after
	// (a restart would be refused again every few seconds), and a line
	// saying why.
	if code != service.ExitConfig || !strings.Contains(errOut, "holds a password") || !strings.Contains(errOut, "chmod 600 "+ef) ||
		!strings.Contains(errOut, "not watching") || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("a readable env file with a password: exit %d, want %d\n%s%s", code, service.ExitConfig, out, errOut)
	}
	write("MCP_RECONNECT_LOG_LEVEL=info\n", 0o666)
	if code, _, errOut := runCLI(t, args...); code != service.ExitConfig || !strings.Contains(errOut, "other users can change it") {
		t.Fatalf("a writable env file: exit %d, want %d\n%s", code, service.ExitConfig, errOut)
	}
	// A readable one without a password: a warning, and watch goes on
	// (to the duplicate check, which ends it here).
	write("MCP_RECONNECT_LOG_LEVEL=info\n", 0o644)
	otherDaemon(t, "http://127.0.0.1:1")
	if code, _, errOut := runCLI(t, args...); code != service.ExitDuplicate || !strings.Contains(errOut, "environment file is readable by other users") {
		t.Fatalf("a readable env file without a password: exit %d, want a warning and then the run\n%s", code, errOut)
	}
}
