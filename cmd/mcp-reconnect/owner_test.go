package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// giveAway chowns p to nobody, or skips when this test cannot (not root).
func giveAway(t *testing.T, p string) int {
	t.Helper()
	if os.Getuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root to give the file to another user: CI runs as root")
		}
		t.Skip("needs root to give the file to another user")
	}
	const other = 65534 // nobody
	if err := os.Chown(p, other, other); err != nil {
		t.Fatal(err)
	}
	return other
}

// A config file owned by another user is refused whatever its mode, as
// ssh refuses one: its owner can change it at any time (chmod is the
// owner's), and it names the OpenCode URL the password goes to and the
// directories whose MCP servers OpenCode will start (rule 13: only the
// user may cause that).
func TestConfigFileOfAnotherUserIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte("url = \"http://127.0.0.1:4096\"\ndirectory = [\"/home/victim/project\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := giveAway(t, p)
	var f watchFlags
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	_, err := loadConfigFile(p, true)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "another user") {
		t.Fatalf("loadConfigFile(%s owned by uid %d, mode 0644) = %v: another user's config file is used (directories %v)", p, other, err, f.directories)
	}
}

// A password file owned by another user is refused too, even 0600: its
// owner chooses the password, and with it which server is trusted.
func TestPasswordFileOfAnotherUserIsRefused(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "work.pw")
	if err := os.WriteFile(pw, []byte("their-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	giveAway(t, pw)
	cfg := writeConfig(t, "[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npassword-file = \""+pw+"\"\n")
	f, fs := loadFlags(t, "--config", cfg)
	_, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "another user") || strings.Contains(err.Error(), "their-secret") {
		t.Fatalf("servers with a password file of another user: %v", err)
	}
}
