package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// flags > env > file > defaults.
func TestConfigPrecedence(t *testing.T) {
	path := writeConfig(t, `
url = "http://127.0.0.1:7000"
initial-delay = "2s"
max-delay = "40s"
max-concurrent = 4
jitter = 0.1
directory = ["/a", "/b c"]
`)
	var f watchFlags
	fs := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	f.register(fs)
	t.Setenv("MCP_RECONNECT_MAX_DELAY", "50s")
	if err := fs.Parse([]string{"--config", path, "--initial-delay", "3s"}); err != nil {
		t.Fatal(err)
	}
	if err := f.load(fs); err != nil {
		t.Fatal(err)
	}
	if f.engine.Backoff.Initial != 3*time.Second { // flag
		t.Errorf("initial-delay = %v, want the flag's 3s", f.engine.Backoff.Initial)
	}
	if f.engine.Backoff.Max != 50*time.Second { // env over file
		t.Errorf("max-delay = %v, want the env's 50s", f.engine.Backoff.Max)
	}
	if len(f.urls) != 1 || f.urls[0] != "http://127.0.0.1:7000" || f.engine.MaxConcurrent != 4 || f.engine.Backoff.Jitter != 0.1 || len(f.directories) != 2 { // file
		t.Errorf("from the file: %+v", f)
	}
	if f.engine.IdleInterval != 30*time.Second { // default
		t.Errorf("idle-interval = %v, want the default", f.engine.IdleInterval)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	cases := map[string]string{
		`nope = 1`:                `unknown key "nope"`,
		`max-concurrent = "many"`: `key "max-concurrent"`,
		`initial-delay = "soon"`:  `key "initial-delay"`,
		`jitter = [0.1, 0.2]`:     `key "jitter" takes one value`,
		"[[opencode]]\nurl = \"http://127.0.0.1:1\"\npassword = \"x\"": `put the password in a file named by password-file`,
		"[[opencode]]\nurl = \"http://127.0.0.1:1\"\nport = 3":         `unknown key "port"`,
		"[[opencode]]\nusername = \"u\"":                               `url is missing`,
		`this is not toml`:                                             `config file`,
		`password = [1]`:                                               `key "password" takes one value`,
	}
	for body, want := range cases {
		path := writeConfig(t, body)
		code, _, errOut := runCLI(t, "watch", "--config", path)
		if code == 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, path) {
			t.Errorf("%q: exit %d, stderr %q, want it to name %q and the file", body, code, errOut, want)
		}
	}
	code, _, errOut := runCLI(t, "watch", "--config", "/no/such/config.toml")
	if code == 0 || !strings.Contains(errOut, "/no/such/config.toml") {
		t.Errorf("a missing --config file: exit %d, %q", code, errOut)
	}
	path := writeConfig(t, `password = "s3cret-in-file"
jitter = "x"`)
	_, out, errOut := runCLI(t, "watch", "--config", path)
	if strings.Contains(out+errOut, "s3cret-in-file") {
		t.Error("a password from the config file was printed")
	}
}

// doctor exits non-zero and names the route when OpenCode's /doc lacks one.
func TestDoctorNamesMissingRoute(t *testing.T) {
	raw, err := os.ReadFile("../../internal/doctor/testdata/opencode-1.18.34-openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	delete(doc["paths"].(map[string]any), "/config")
	b, _ := json.Marshal(doc)
	fake := fakeopencode.New(nil)
	fake.SetDoc(b)
	hs := httptest.NewServer(fake)
	defer hs.Close()
	code, out, _ := runCLI(t, "doctor", "--url", hs.URL, "--status-addr", "", "--config", "")
	if code == 0 || !strings.Contains(out, "GET /config") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	fake.SetDoc(raw)
	if code, out, _ := runCLI(t, "doctor", "--url", hs.URL, "--status-addr", "", "--config", ""); code != 0 {
		t.Fatalf("all well: exit %d, output:\n%s", code, out)
	}
}
