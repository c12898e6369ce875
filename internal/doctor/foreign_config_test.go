package doctor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// ("--reap … only processes of this user whose parentage proves they
// are orphans"; a config file owned by another user is refused, as ssh
// does.) Doctor reads the MCP
// config of the working directory of every adopted process of the user,
// so one such process whose cwd is /tmp makes it read /tmp/opencode.json,
// which any local user may write, and take its "local servers" as the
// user's; adopted processes anywhere are then matched by command alone.
// Another user reads ana's argv in /proc, names her emacs daemon (adopted
// by systemd --user, no MCP server at all) as a server there, and
// `doctor --reap --yes` ends it. (Needs root here, to make a file of
// another user.)
func TestAnotherUsersConfigCannotMakeDoctorReap(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("making a file owned by another user needs root: CI runs as root")
		}
		t.Skip("making a file owned by another user needs root")
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("OPENCODE_TEST_MANAGED_CONFIG_DIR", t.TempDir())
	t.Setenv("OPENCODE_CONFIG_DIR", "")
	t.Setenv("OPENCODE_CONFIG", "")
	t.Setenv("OPENCODE_CONFIG_CONTENT", "")
	tmp := filepath.Join(t.TempDir(), "tmp") // stands for /tmp
	must(t, os.Mkdir(tmp, 0o777|os.ModeSticky))
	must(t, os.Chmod(tmp, 0o777|os.ModeSticky))
	evil := filepath.Join(tmp, "opencode.json")
	must(t, os.WriteFile(evil, []byte(`{"mcp":{"x":{"type":"local","command":["/usr/bin/emacs","--daemon"]}}}`), 0o644))
	must(t, os.Chown(evil, 4242, 4242)) // bo's file

	root := t.TempDir()
	writeTree(t, root, []fakeProc{
		{PID: 1, UID: 0, Start: 1, Argv: []string{"/sbin/init"}, Comm: "systemd", Cwd: "/"},
		{PID: 900, PPID: 1, UID: ana, Start: 900, Argv: []string{"/usr/lib/systemd/systemd", "--user"}, Comm: "systemd", Cwd: "/"},
		{PID: 3004, PPID: 1, UID: ana, Start: 50004, Argv: []string{"sleep", "600"}, Cwd: tmp},
		{PID: 3100, PPID: 900, UID: ana, Start: 50100, Argv: []string{"/usr/bin/emacs", "--daemon"}, Cwd: "/home/ana"},
	})
	o := Options{ProcessTable: func() (procview.Table, error) { return procview.ProcFS(root) }, UID: ana}
	f, checks := FindProcesses(context.Background(), o)
	fr := &fakeReap{}
	var report bytes.Buffer
	if err := Reap(context.Background(), f, ReapOptions{Yes: true, Report: &report, reap: fr.reap}); err != nil {
		t.Fatal(err)
	}
	if len(fr.ended) != 0 {
		t.Fatalf("doctor --reap --yes ended %v on the word of %s, another user's file:\n%s%s", fr.ended, evil, describe(checks), report.String())
	}
}
