package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// install "checks the config file as watch would read it" so it
// does not start a service that can only fail, but checkServiceConfig
// skips the [[opencode]] tables: a password-file others can read (which
// watch refuses at every start, so systemd restarts it every 5 s forever)
// passes install, and so does an [[opencode]] table with an unknown key.
func TestServiceInstallChecksPasswordFiles(t *testing.T) {
	home := serviceHome(t)
	pw := filepath.Join(home, "work.pw")
	if err := os.WriteFile(pw, []byte("hunter2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, "c.toml")
	if err := os.WriteFile(cfg, []byte("[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npassword-file = \""+pw+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "service", "install", "--dry-run", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "chmod 600 "+pw) {
		t.Fatalf("install accepted a config whose password-file others can read (watch will refuse it at every start): exit %d\n%s%s", code, out, errOut)
	}
}

func TestServiceInstallChecksServerTables(t *testing.T) {
	home := serviceHome(t)
	cfg := filepath.Join(home, "c.toml")
	if err := os.WriteFile(cfg, []byte("[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npasword-file = \"/x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "service", "install", "--dry-run", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "pasword-file") {
		t.Fatalf("install accepted an [[opencode]] table watch refuses: exit %d\n%s%s", code, out, errOut)
	}
}

// What watch refuses of the servers the config file names, install
// refuses first: here a password sent over plain http to another host.
func TestServiceInstallRefusesWhatWatchRefusesOfTheServers(t *testing.T) {
	home := serviceHome(t)
	cfg := filepath.Join(home, "c.toml")
	if err := os.WriteFile(cfg, []byte("url = \"http://10.1.2.3:4096\"\npassword = \"hunter2\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "service", "install", "--dry-run", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "plain http to another host") || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("install accepted a config watch refuses at every start: exit %d\n%s%s", code, out, errOut)
	}
}
