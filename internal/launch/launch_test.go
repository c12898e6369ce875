package launch

import (
	"os"
	"strings"
	"testing"
)

func TestServes(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]bool{
		"":                        true, // the TUI
		"serve":                   true,
		"web --port 5000":         true,
		"--port 5000":             true,
		"--model openai/x":        true,
		"--log-level DEBUG serve": true,
		dir:                       true, // a project directory
		"mcp auth github":         false,
		"--version":               false,
		"-h":                      false,
		"run hello":               false,
		"models":                  false,
		"upgrade":                 false,
		"--port=5000 " + dir:      true,
		"/does/not/exist":         false,
	}
	for args, want := range cases {
		if got := Serves(strings.Fields(args)); got != want {
			t.Errorf("Serves(%q) = %v, want %v", args, got, want)
		}
	}
}

func TestPlanPicksPortAndPassword(t *testing.T) {
	p, err := NewPlan([]string{"true", "serve"}, []string{"A=1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	// "true" is not OpenCode: nothing added, no URL.
	if len(p.Args) != 2 || p.URL != "" {
		t.Fatalf("plan for a non-OpenCode command = %+v", p)
	}
	if !p.GeneratedPassword || len(p.Password) < 24 {
		t.Fatalf("no strong generated password: %q", p.Password)
	}
	if lookupEnv(p.Env, PasswordEnv) != p.Password || lookupEnv(p.Env, "A") != "1" {
		t.Fatalf("env = %v", p.Env)
	}
	for _, a := range p.Args {
		if strings.Contains(a, p.Password) {
			t.Fatal("the password is on the command line")
		}
	}
}

func fakeOpenCode(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	path := dir + "/opencode"
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPlanForOpenCode(t *testing.T) {
	oc := fakeOpenCode(t)
	p, err := NewPlan([]string{oc, "serve"}, nil, "given")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Args) != 4 || p.Args[2] != "--port" || !strings.HasPrefix(p.URL, "http://127.0.0.1:") || p.Password != "given" || p.GeneratedPassword {
		t.Fatalf("plan = %+v", p)
	}
	p, err = NewPlan([]string{oc, "--port", "4100", "--hostname", "0.0.0.0"}, []string{PasswordEnv + "=from-env"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Args) != 5 || p.URL != "http://127.0.0.1:4100" || p.Password != "from-env" {
		t.Fatalf("plan with a port = %+v", p)
	}
	p, err = NewPlan([]string{oc, "mcp", "auth", "x"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Args) != 4 || p.URL != "" {
		t.Fatalf("a subcommand got a port: %+v", p)
	}
	if _, err := NewPlan([]string{oc, "--port", "nope"}, nil, ""); err == nil {
		t.Fatal("a bad --port was accepted")
	}
	if _, err := NewPlan(nil, nil, ""); err == nil {
		t.Fatal("an empty command was accepted")
	}
	if _, err := NewPlan([]string{"/no/such/opencode"}, nil, ""); err == nil {
		t.Fatal("a missing command was accepted")
	}
}

func TestExitCodes(t *testing.T) {
	for cmd, want := range map[string]int{"exit 3": 3, "exit 0": 0, "kill -TERM $$": 128 + 15} {
		p, err := NewPlan([]string{"sh", "-c", cmd}, nil, "x")
		if err != nil {
			t.Fatal(err)
		}
		c, err := Start(p, IO{Stdin: strings.NewReader(""), Stdout: os.Stdout, Stderr: os.Stderr})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ExitCode(); got != want {
			t.Errorf("%q: exit code %d, want %d", cmd, got, want)
		}
	}
}

func TestTail(t *testing.T) {
	tl := NewTail(10)
	_, _ = tl.Write([]byte("one\ntwo\nthree\nfour\n"))
	if got := tl.Lines(2); got != "hree\nfour" { // the last 10 bytes
		t.Fatalf("Lines(2) = %q", got)
	}
}

// The user's OPENCODE_CONFIG_CONTENT (JSON or JSONC) reaches the child
// untouched: the daemon has nothing to add to it.
func TestConfigContentPassesUntouched(t *testing.T) {
	content := "{\n  // a comment\n  \"plugin\": [\"x\"], \"mcp\": {\"a\": {\"type\": \"local\", \"command\": [\"y\"]}},\n}"
	p, err := NewPlan([]string{fakeOpenCode(t)}, []string{"OPENCODE_CONFIG_CONTENT=" + content}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := lookupEnv(p.Env, "OPENCODE_CONFIG_CONTENT"); got != content {
		t.Fatalf("OPENCODE_CONFIG_CONTENT = %q", got)
	}
}
