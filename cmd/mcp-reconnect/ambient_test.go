package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// passwordFile writes a private password file holding pw.
func passwordFile(t *testing.T, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "opencode.pw")
	if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// People export $OPENCODE_SERVER_PASSWORD for OpenCode itself. With
// [[opencode]] tables, each with its own password-file, and no URL given,
// it is meant for no server here: watch runs, each table with its own
// password, the OpenCode 2 service is followed as without the variable,
// and one info line says the variable is not used, never its value. A
// password the config file holds, or one typed as --password, is still
// refused (the variable had only hidden the file's); with --url or the
// config file's url the variable's password goes there, as before.
func TestEnvironmentPasswordIsLeftToOpenCodeBesideTables(t *testing.T) {
	const ambient = "ambient-secret"
	t.Setenv("OPENCODE_SERVER_PASSWORD", ambient)
	tables := "[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npassword-file = \"" + passwordFile(t, "one-secret") + "\"\n" +
		"[[opencode]]\nurl = \"http://127.0.0.1:5002\"\npassword-file = \"" + passwordFile(t, "two-secret") + "\"\n"
	cfg := writeConfig(t, tables)

	var logged bytes.Buffer
	f, fs := loadFlags(t, "--config", cfg)
	got, err := f.servers(fs, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	if len(got) != 3 || got[0].Password != "one-secret" || got[1].Password != "two-secret" || got[2].ServiceFile == "" || got[2].Password != "" {
		t.Fatalf("servers = %+v; want each table with its own password, then the OpenCode 2 service", got)
	}
	if strings.Count(logged.String(), "OPENCODE_SERVER_PASSWORD") != 1 || !strings.Contains(logged.String(), `level=INFO msg="$OPENCODE_SERVER_PASSWORD is set but not used`) {
		t.Errorf("want one info line saying the variable is not used, got:\n%s", logged.String())
	}
	if strings.Contains(logged.String(), ambient) {
		t.Errorf("the log shows the variable's value:\n%s", logged.String())
	}

	for _, tc := range []struct {
		name, config string
		args         []string
		origin       string
	}{
		{"config file password", "password = \"cfg-secret\"\n" + tables, nil, "config file "},
		{"typed", tables, []string{"--password", "typed-secret"}, "--password"},
	} {
		f, fs := loadFlags(t, append([]string{"--config", writeConfig(t, tc.config)}, tc.args...)...)
		_, err := f.servers(fs, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "from "+tc.origin) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: servers = %v; want the password refused, naming %q and no password", tc.name, err, tc.origin)
		}
	}

	for _, args := range [][]string{{"--config", cfg, "--url", "http://127.0.0.1:6001"}, {"--config", writeConfig(t, "url = \"http://127.0.0.1:6001\"\n"+tables)}} {
		f, fs := loadFlags(t, args...)
		got, err := f.servers(fs, slog.New(slog.DiscardHandler))
		if err != nil || len(got) != 3 || got[0].URL != "http://127.0.0.1:6001" || got[0].Password != ambient || got[1].Password != "one-secret" {
			t.Fatalf("%v: %+v, %v; want the variable's password sent to the URL given", args, got, err)
		}
	}
}

// $OPENCODE_SERVER_USERNAME is exported for OpenCode itself, as
// $OPENCODE_SERVER_PASSWORD is, and means no more to the servers of the
// config file's [[opencode]] tables: each table takes its own
// credentials (username, password-file). The password variable is set
// aside for them; the username variable is not: a table without a
// username key is sent the ambient user with its own password-file, and
// an OpenCode 1.x that expects its default user ("opencode") refuses
// every request (the daemon says "opencode refused the credentials").
func TestEnvironmentUsernameIsLeftToOpenCodeBesideTables(t *testing.T) {
	t.Setenv("OPENCODE_SERVER_USERNAME", "alice")
	t.Setenv("OPENCODE_SERVER_PASSWORD", "ambient-secret")
	tables := "[[opencode]]\nurl = \"http://127.0.0.1:5001\"\npassword-file = \"" + passwordFile(t, "one-secret") + "\"\n" +
		"[[opencode]]\nurl = \"http://127.0.0.1:5002\"\npassword-file = \"" + passwordFile(t, "two-secret") + "\"\n"
	f, fs := loadFlags(t, "--config", writeConfig(t, tables))
	got, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	for _, s := range got[:2] {
		if s.Username != "opencode" {
			t.Errorf("table server %s gets the ambient username %q with its own password file, want OpenCode's default \"opencode\"", s.URL, s.Username)
		}
	}
}
