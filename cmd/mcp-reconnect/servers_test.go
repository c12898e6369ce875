package main

import (
	"bytes"
	"github.com/spf13/pflag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// `url = …` in the config file is a URL "given" (the flag help,
// serviceFile's doc and `service install --help` all say a configured URL
// means the 1.x server it names is watched). But applyConfigFile sets the
// flag's Value without marking it Changed, so when the OpenCode 2 service
// file exists, watch follows the service and silently drops the
// configured URL — and the installed service watches the wrong server.
func TestConfigURLWinsOverTheDefaultServiceFile(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	if err := os.MkdirAll(filepath.Join(state, "opencode"), 0o700); err != nil {
		t.Fatal(err)
	}
	svc := `{"id":"x","version":"2.0.0","url":"http://127.0.0.1:49374","pid":1,"password":"svc-pw"}`
	if err := os.WriteFile(filepath.Join(state, "opencode", "service.json"), []byte(svc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "url = \"http://127.0.0.1:5555\"\n")
	f, fs := loadFlags(t, "--config", cfg)
	got, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		if s.URL == "http://127.0.0.1:5555" {
			return
		}
	}
	t.Fatalf("servers = %+v: the config file's url is not watched (the service file took its place)", got)
}

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
