package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// One password given once (--password, $OPENCODE_SERVER_PASSWORD, the
// config file's password) is not sent to several --url servers: each
// would learn the others' password. The error says how to give each its
// own, and never holds the password.
func TestOnePasswordForSeveralURLsIsRefused(t *testing.T) {
	t.Setenv("OPENCODE_SERVER_PASSWORD", "shared-secret")
	f, fs := loadFlags(t, "--config", "", "--url", "http://127.0.0.1:4096", "--url", "http://127.0.0.1:4196")
	_, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "[[opencode]]") || !strings.Contains(err.Error(), "password-file") ||
		!strings.Contains(err.Error(), "OPENCODE_SERVER_PASSWORD") || strings.Contains(err.Error(), "shared-secret") {
		t.Fatalf("servers = %v: one password goes to every --url", err)
	}
	// One --url with it is fine, and so are several without one.
	if _, err := func() (any, error) {
		f, fs := loadFlags(t, "--config", "", "--url", "http://127.0.0.1:4096")
		return f.servers(fs, slog.New(slog.DiscardHandler))
	}(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENCODE_SERVER_PASSWORD", "")
	f, fs = loadFlags(t, "--config", "", "--url", "http://127.0.0.1:4096", "--url", "http://127.0.0.1:4196")
	if got, err := f.servers(fs, slog.New(slog.DiscardHandler)); err != nil || len(got) != 2 {
		t.Fatalf("two URLs without a password: %+v, %v", got, err)
	}
}

// Basic auth over plain http is readable by anyone on the network path:
// a password for a plain-http URL that is not loopback is refused unless
// the user opts in (--allow-http-password); loopback (a sidecar in the
// pod's or compose service's network namespace reaches OpenCode at
// 127.0.0.1) and https are fine, and so is such a URL without a password.
func TestPasswordOverPlainHTTPToAnotherHostIsRefused(t *testing.T) {
	t.Setenv("OPENCODE_SERVER_PASSWORD", "pw")
	servers := func(args ...string) error {
		f, fs := loadFlags(t, append([]string{"--config", ""}, args...)...)
		_, err := f.servers(fs, slog.New(slog.DiscardHandler))
		return err
	}
	for _, u := range []string{"http://192.0.2.5:4096", "http://opencode:4096", "http://[2001:db8::1]:4096"} {
		err := servers("--url", u)
		if err == nil || !strings.Contains(err.Error(), u) || !strings.Contains(err.Error(), "--allow-http-password") || strings.Contains(err.Error(), "pw\"") {
			t.Errorf("--url %s with a password: %v", u, err)
		}
		if err := servers("--url", u, "--allow-http-password"); err != nil {
			t.Errorf("--url %s --allow-http-password: %v", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:4096", "http://127.0.0.2:4096", "http://localhost:4096", "http://[::1]:4096", "https://192.0.2.5:4096"} {
		if err := servers("--url", u); err != nil {
			t.Errorf("--url %s with a password: %v", u, err)
		}
	}

	// A password file of an [[opencode]] table counts the same.
	pw := filepath.Join(t.TempDir(), "remote.pw")
	if err := os.WriteFile(pw, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENCODE_SERVER_PASSWORD", "")
	cfg := writeConfig(t, "[[opencode]]\nurl = \"http://192.0.2.9:4096\"\npassword-file = \""+pw+"\"\n")
	if err := servers("--config", cfg); err == nil || !strings.Contains(err.Error(), "http://192.0.2.9:4096") || strings.Contains(err.Error(), "file-secret") {
		t.Errorf("an [[opencode]] table over plain http: %v", err)
	}
	if err := servers("--config", cfg, "--allow-http-password"); err != nil {
		t.Errorf("an [[opencode]] table over plain http, --allow-http-password: %v", err)
	}
}

// doctor sends the password too: the same refusal, before any request.
func TestDoctorRefusesPasswordOverPlainHTTP(t *testing.T) {
	t.Setenv("OPENCODE_SERVER_PASSWORD", "pw-secret")
	code, out, errOut := runCLI(t, "doctor", "--url", "http://192.0.2.5:4096")
	if code == 0 || !strings.Contains(errOut, "--allow-http-password") || strings.Contains(out+errOut, "pw-secret") || out != "" {
		t.Fatalf("doctor --url http://192.0.2.5:4096 with a password: exit %d\n%s%s", code, out, errOut)
	}
}

// A password file that is not a regular file (a FIFO would block a read
// for ever) is refused at once.
func TestPasswordFileMustBeARegularFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pw")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mkfifo under CI: %v", err)
		}
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readPasswordFile(p); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("readPasswordFile(FIFO) = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("readPasswordFile blocked on a FIFO")
	}
}
