package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

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
