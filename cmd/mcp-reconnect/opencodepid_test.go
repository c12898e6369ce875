package main

import (
	"log/slog"
	"strings"
	"testing"
)

// watch --opencode-pid serves one OpenCode process: its server is the
// --url typed for it (what a 1.x plugin passes), with the password from
// the environment; a URL from the environment or the config file names
// some other server and is not taken, nor are [[opencode]] tables;
// several --url, or no process id, are refused.
func TestOpenCodePIDTakesOnlyTheTypedURL(t *testing.T) {
	t.Setenv("OPENCODE_SERVER_PASSWORD", "pw")
	log := slog.New(slog.DiscardHandler)
	f, _ := loadFlags(t, "--config", "", "--url", "http://127.0.0.1:4196/")
	oc, err := f.openCodeProcess(42, log)
	if err != nil || oc.PID != 42 || oc.Server.URL != "http://127.0.0.1:4196/" || oc.Server.Password != "pw" {
		t.Errorf("--url typed: %+v, %v", oc, err)
	}

	t.Setenv("OPENCODE_URL", "http://127.0.0.1:4096")
	cfg := writeConfig(t, "url = \"http://127.0.0.1:5000\"\n\n[[opencode]]\nurl = \"http://127.0.0.1:5001\"\n")
	for _, args := range [][]string{{"--config", ""}, {"--config", cfg}} {
		f, _ = loadFlags(t, args...)
		if oc, err := f.openCodeProcess(42, log); err != nil || oc.Server.URL != "" || !oc.Channels {
			t.Errorf("%v and $OPENCODE_URL: %+v, %v; want the server found from the process", args, oc, err)
		}
	}

	f, _ = loadFlags(t, "--config", "", "--url", "http://127.0.0.1:4196", "--url", "http://127.0.0.1:4197")
	if _, err := f.openCodeProcess(42, log); err == nil || !strings.Contains(err.Error(), "one --url") {
		t.Errorf("two --url: %v", err)
	}
	f, _ = loadFlags(t, "--config", "")
	if _, err := f.openCodeProcess(0, log); err == nil || !strings.Contains(err.Error(), "not a process id") {
		t.Errorf("pid 0: %v", err)
	}
}
