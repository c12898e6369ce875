package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The OpenCode 2 service is "one more entry", but the "listed
// twice" check skips it. A config that also lists the service's URL in an
// [[opencode]] table (the user knows its port) gives two engines for one
// server: two loops check the same directory concurrently (rule 7), each
// with its own counters (double the connects), and both report under one
// metrics label, overwriting each other's gauges.
func TestServiceAlsoListedIsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "service.json")
	svc := `{"id":"x","version":"2.0.0","url":"http://127.0.0.1:49374","pid":1,"password":"svc-pw"}`
	if err := os.WriteFile(file, []byte(svc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "[[opencode]]\nurl = \"http://127.0.0.1:49374\"\n")
	f, fs := loadFlags(t, "--config", cfg, "--service-file", file)
	got, err := f.servers(fs, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("servers = %+v, %v: the service's URL is watched twice", got, err)
	}
}
