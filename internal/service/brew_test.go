package service

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// brewFile writes what `brew services start mcp-reconnect` writes: a
// launchd agent homebrew.mxcl.mcp-reconnect on macOS, a systemd user unit
// homebrew.mcp-reconnect.service on Linux.
func brewFile(t *testing.T, env Env) string {
	t.Helper()
	p := filepath.Join(env.Home, "Library", "LaunchAgents", "homebrew.mxcl.mcp-reconnect.plist")
	if env.GOOS == "linux" {
		p = filepath.Join(env.Home, ".config", "systemd", "user", "homebrew.mcp-reconnect.service")
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("written by brew services\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A daemon kept on by `brew services` is the same daemon: install refuses
// to start a second one beside it (two would watch the same OpenCode and
// both connect every failed server), and says how to choose.
func TestInstallRefusesBesideBrewServices(t *testing.T) {
	for _, goos := range []string{"darwin", "linux"} {
		t.Run(goos, func(t *testing.T) {
			env, _ := testEnv(t, goos, nil)
			m := mustNew(t, env)
			if _, err := m.Plan(Spec{Binary: "/usr/local/bin/mcp-reconnect"}, "t", time.Now()); err != nil {
				t.Fatalf("without brew services: %v", err)
			}
			p := brewFile(t, env)
			_, err := m.Plan(Spec{Binary: "/usr/local/bin/mcp-reconnect"}, "t", time.Now())
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "brew services stop mcp-reconnect") {
				t.Fatalf("beside brew services: %v; want a refusal naming %s and the way out", err, p)
			}
			if _, err := os.Stat(m.p.path()); err == nil {
				t.Fatal("the refused plan wrote the service file")
			}
		})
	}
}

// status reports a brew services install and what its manager says of
// it, so `service status` shows the daemon that runs instead of "not
// installed".
func TestStatusNoticesBrewServices(t *testing.T) {
	for _, tc := range []struct {
		goos, query, answer string
		want                Running
	}{
		{"darwin", "launchctl print gui/501/homebrew.mxcl.mcp-reconnect", "gui/501/homebrew.mxcl.mcp-reconnect = {\n\tstate = running\n\tpid = 812\n\truns = 1\n}\n",
			Running{Active: true, State: "running", PID: 812, Restarts: 0}},
		{"linux", "systemctl --user show homebrew.mcp-reconnect.service --property=LoadState,ActiveState,SubState,MainPID,NRestarts,UnitFileState",
			"LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=0\nUnitFileState=enabled\n",
			Running{Active: true, State: "active (running)", PID: 4242, Restarts: 0, Enabled: "enabled"}},
	} {
		t.Run(tc.goos, func(t *testing.T) {
			env, r := testEnv(t, tc.goos, nil)
			m := mustNew(t, env)
			rep, err := m.Status(context.Background(), "/usr/local/bin/mcp-reconnect")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Brew != nil {
				t.Fatalf("without brew services: %+v", rep.Brew)
			}
			p := brewFile(t, env)
			r.answer = func(argv []string) ([]byte, error) {
				if strings.Join(argv, " ") == tc.query {
					return []byte(tc.answer), nil
				}
				return nil, nil
			}
			rep, err = m.Status(context.Background(), "/usr/local/bin/mcp-reconnect")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Brew == nil || rep.Brew.Path != p || rep.Brew.Running == nil || *rep.Brew.Running != tc.want {
				t.Fatalf("brew = %+v (running %+v), want %s running as %+v", rep.Brew, rep.Brew.Running, p, tc.want)
			}
			if rep.Installed {
				t.Fatal("brew's file counted as install's own")
			}
		})
	}
}
