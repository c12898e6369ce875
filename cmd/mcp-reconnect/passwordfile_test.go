package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// loadWatch parses args as watch's flags and loads the environment and
// config file, as watch does.
func loadWatch(t *testing.T, args ...string) (*watchFlags, *pflag.FlagSet, error) {
	t.Helper()
	var f watchFlags
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &f, fs, f.load(fs)
}

func writeSecret(t *testing.T, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "opencode-password")
	if err := os.WriteFile(p, []byte("s3cret-from-file\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// A container gets its password from a mounted secret file, never from an
// argument: --password-file, $MCP_RECONNECT_PASSWORD_FILE or the config's
// password-file key, read as the [[opencode]] password files are.
func TestPasswordFile(t *testing.T) {
	t.Setenv("OPENCODE_SERVER_PASSWORD", "")
	t.Setenv("MCP_RECONNECT_PASSWORD_FILE", "")
	t.Setenv("MCP_RECONNECT_CONFIG", "")
	secret := writeSecret(t, 0o600)
	cfg := writeConfig(t, "password-file = \""+secret+"\"\n")
	for _, tc := range []struct {
		name   string
		args   []string
		env    string
		source string
	}{
		{"flag", []string{"--config", "", "--password-file", secret}, "", "password file " + secret},
		{"env", []string{"--config", ""}, secret, "password file " + secret},
		{"config", []string{"--config", cfg}, "", "password file " + secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MCP_RECONNECT_PASSWORD_FILE", tc.env)
			f, fs, err := loadWatch(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if f.password != "s3cret-from-file" || f.passwordSource != tc.source || !fs.Changed("password") {
				t.Fatalf("password %q from %q (given: %v), want the file's from %q", f.password, f.passwordSource, fs.Changed("password"), tc.source)
			}
		})
	}
}

func TestPasswordFileRefusals(t *testing.T) {
	t.Setenv("OPENCODE_SERVER_PASSWORD", "")
	t.Setenv("MCP_RECONNECT_PASSWORD_FILE", "")
	open := writeSecret(t, 0o644)
	_, _, err := loadWatch(t, "--config", "", "--password-file", open)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+open) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a password file others can read: %v", err)
	}
	_, _, err = loadWatch(t, "--config", "", "--password-file", filepath.Join(t.TempDir(), "missing"))
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing password file: %v", err)
	}
	secret := writeSecret(t, 0o600)
	_, _, err = loadWatch(t, "--config", "", "--password-file", secret, "--password", "other")
	if err == nil || !strings.Contains(err.Error(), "--password-file") || strings.Contains(err.Error(), "other") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a password and a password file: %v", err)
	}
	t.Setenv("OPENCODE_SERVER_PASSWORD", "from-env")
	if _, _, err = loadWatch(t, "--config", "", "--password-file", secret); err == nil || !strings.Contains(err.Error(), "OPENCODE_SERVER_PASSWORD") {
		t.Fatalf("$OPENCODE_SERVER_PASSWORD and a password file: %v", err)
	}
}

// watch --help offers it, with its variable.
func TestPasswordFileInHelp(t *testing.T) {
	code, out, _ := runCLI(t, "watch", "--help")
	if code != 0 || !strings.Contains(out, "--password-file") || !strings.Contains(out, "$MCP_RECONNECT_PASSWORD_FILE") {
		t.Fatalf("watch --help: %d\n%s", code, out)
	}
}

// service install reads the config file's password-file as the service's
// watch will, and refuses one watch would refuse.
func TestServiceInstallChecksThePasswordFile(t *testing.T) {
	home := serviceHome(t)
	secret := filepath.Join(home, "pw")
	if err := os.WriteFile(secret, []byte("s3cret-from-file\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, "c.toml")
	if err := os.WriteFile(cfg, []byte("password-file = \""+secret+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "service", "install", "--dry-run", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "chmod 600 "+secret) || strings.Contains(out+errOut, "s3cret") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut = runCLI(t, "service", "install", "--dry-run", "--config", cfg); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
