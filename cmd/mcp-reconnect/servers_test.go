package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func loadFlags(t *testing.T, args ...string) (*watchFlags, *pflag.FlagSet) {
	t.Helper()
	var f watchFlags
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	f.registerOptIns(fs, true)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := f.load(fs); err != nil {
		t.Fatal(err)
	}
	return &f, fs
}

// --url may be repeated, and [[opencode]] tables add servers with their
// own password files; the 1.x default is watched only when nothing else is.
func TestServersFromFlagsAndConfig(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "work.pw")
	if err := os.WriteFile(pw, []byte("work-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npassword-file = \""+pw+"\"\ndirectory = [\"/w\"]\n\n[[opencode]]\nurl = \"http://127.0.0.1:5002\"\n")

	f, fs := loadFlags(t, "--config", cfg)
	got, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// Neither a URL nor a password is given: the OpenCode 2 service is one
	// more entry, followed whenever its service file appears.
	if len(got) != 3 || got[0].URL != "http://127.0.0.1:5001" || got[0].Password != "work-secret" || got[0].Directories[0] != "/w" ||
		got[1].URL != "http://127.0.0.1:5002" || got[1].Password != "" || got[2].Discover == nil {
		t.Fatalf("servers = %+v, want the two [[opencode]] entries and the OpenCode 2 service", got)
	}

	f, fs = loadFlags(t, "--config", cfg, "--url", "http://127.0.0.1:6001", "--url", "http://127.0.0.1:6002")
	got, err = f.servers(fs, slog.New(slog.DiscardHandler))
	if err != nil || len(got) != 4 || got[0].URL != "http://127.0.0.1:6001" || got[1].URL != "http://127.0.0.1:6002" {
		t.Fatalf("servers = %+v, %v: want both --url, then the config's", got, err)
	}

	f, fs = loadFlags(t, "--config", "")
	got, _ = f.servers(fs, slog.New(slog.DiscardHandler))
	if len(got) != 1 || got[0].URL != defaultURL {
		t.Fatalf("servers = %+v, want the 1.x default alone", got)
	}

	f, fs = loadFlags(t, "--config", "", "--url", "http://127.0.0.1:7000", "--url", "http://127.0.0.1:7000/")
	if _, err := f.servers(fs, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a server listed twice: %v", err)
	}
}

// A password file others can read is refused with the fix, and its
// content never appears in an error.
func TestPasswordFileMustBePrivate(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "open.pw")
	if err := os.WriteFile(pw, []byte("open-secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npassword-file = \""+pw+"\"\n")
	f, fs := loadFlags(t, "--config", cfg)
	_, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+pw) || strings.Contains(err.Error(), "open-secret") {
		t.Fatalf("err = %v", err)
	}
}

// $OPENCODE_URL is one URL (its colons are not a list separator).
func TestOpenCodeURLFromEnvIsOneURL(t *testing.T) {
	t.Setenv("OPENCODE_URL", "http://127.0.0.1:4999")
	f, fs := loadFlags(t, "--config", "")
	got, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err != nil || len(got) != 1 || got[0].URL != "http://127.0.0.1:4999" {
		t.Fatalf("servers = %+v, %v", got, err)
	}
}

// Two spellings of one server are one server (the one URL normaliser,
// registry.NormalizeURL): listing both would give it two engines.
func TestServerListedTwiceUnderTwoSpellings(t *testing.T) {
	f, fs := loadFlags(t, "--config", "", "--url", "http://localhost:4096", "--url", "HTTP://127.0.0.1:4096/")
	if _, err := f.servers(fs, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("servers = %v: one server under two spellings is watched twice", err)
	}
}

// A password with [[opencode]] tables and no --url would reach no server
// (each table has its own, and without --url there is no other): an
// error naming where it came from and both fixes, not a password quietly
// unused while the user believes it is sent. With --url it goes there.
// ($OPENCODE_SERVER_PASSWORD is not refused so: see
// TestEnvironmentPasswordIsLeftToOpenCodeBesideTables.)
func TestPasswordWithTablesAndNoURLIsAnError(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "top.pw")
	if err := os.WriteFile(pwFile, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tables := "[[opencode]]\nurl = \"http://127.0.0.1:5001\"\n"
	for _, tc := range []struct {
		name, config string
		args         []string
		env          string
		origin       string
	}{
		{"flag", tables, []string{"--password", "flag-secret"}, "", "--password"},
		{"config file", "password = \"cfg-secret\"\n" + tables, nil, "", "config file "},
		{"password file", tables, []string{"--password-file", pwFile}, "", "password file " + pwFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENCODE_SERVER_PASSWORD", tc.env)
			cfg := writeConfig(t, tc.config)
			f, fs := loadFlags(t, append([]string{"--config", cfg}, tc.args...)...)
			_, err := f.servers(fs, slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("the password is silently unused")
			}
			for _, want := range []string{tc.origin, "no --url", "[[opencode]]", "password-file", "pass --url", cfg} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}

			f, fs = loadFlags(t, append([]string{"--config", cfg, "--url", "http://127.0.0.1:6001"}, tc.args...)...)
			got, err := f.servers(fs, slog.New(slog.DiscardHandler))
			if err != nil || len(got) != 2 || got[0].URL != "http://127.0.0.1:6001" || got[0].Password == "" || got[1].Password != "" {
				t.Fatalf("with --url: %+v, %v; want the password sent there only", got, err)
			}
		})
	}
}

// service install checks the config as watch will read it: a password
// beside [[opencode]] tables (the service has no --url) is refused there.
func TestServiceInstallRefusesAPasswordForNoServer(t *testing.T) {
	cfg := writeConfig(t, "password = \"cfg-secret\"\n[[opencode]]\nurl = \"http://127.0.0.1:5001\"\n")
	err := checkServiceConfig(cfg)
	if err == nil || !strings.Contains(err.Error(), "config file "+cfg) || !strings.Contains(err.Error(), "password-file") || strings.Contains(err.Error(), "cfg-secret") {
		t.Fatalf("checkServiceConfig = %v", err)
	}
	if err := checkServiceConfig(writeConfig(t, "[[opencode]]\nurl = \"http://127.0.0.1:5001\"\n")); err != nil {
		t.Fatalf("tables alone: %v", err)
	}
}
