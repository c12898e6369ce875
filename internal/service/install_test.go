package service

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// After install, the user replaces the unit with one of their own
// (no marker: not what install wrote). The manifest still names the path,
// so a second install overwrites the user's file and uninstall deletes it,
// although the manifest's SHA-256 says the file is not what install wrote.
func TestReinstallKeepsAUnitTheUserReplaced(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	mine := []byte("[Service]\nExecStart=/home/me/bin/my-own-watch\n")
	if err := os.WriteFile(m.Path(), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dryRun(m, Spec{Binary: "/usr/bin/mcp-reconnect"}); err == nil {
		t.Fatalf("install plans to overwrite %s, which holds the user's own unit (no marker, hash differs from the manifest)", m.Path())
	}
}

func TestUninstallKeepsAUnitTheUserReplaced(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	mine := []byte("[Service]\nExecStart=/home/me/bin/my-own-watch\n")
	if err := os.WriteFile(m.Path(), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, _ = m.Uninstall(context.Background(), &out, false)
	b, err := os.ReadFile(m.Path())
	if err != nil || !bytes.Equal(b, mine) {
		t.Fatalf("uninstall removed the user's own unit (no marker, not the manifest's hash): %v\n%s", err, out.String())
	}
}

// A directory a previous install created, removed since by the user
// (with the unit in it), is made again by the next install.
func TestReinstallMakesAgainTheDirectoriesTheUserRemoved(t *testing.T) {
	env, _ := testEnv(t, nil)
	m := mustNew(t, env)
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	if err := os.RemoveAll(filepath.Join(env.Home, ".config", "systemd")); err != nil {
		t.Fatal(err)
	}
	install(t, m, Spec{Binary: "/usr/bin/mcp-reconnect"})
	if _, err := os.Stat(m.Path()); err != nil {
		t.Fatal(err)
	}
}
