package procview

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"
)

// envTable is a Table whose environments are maps; err fails every read.
type envTable struct {
	Table
	env map[int]map[string]string
	err error
	// asked records every name read.
	asked []string
}

func (t *envTable) Env(pid int, name string) (string, bool, error) {
	t.asked = append(t.asked, name)
	if t.err != nil {
		return "", false, t.err
	}
	v, ok := t.env[pid][name]
	return v, ok, nil
}

// Only the config variables are read of OpenCode's environment, and
// only they are answered: its server password and everything else stay
// unread.
func TestOpenCodeEnvReadsOnlyTheConfigVariables(t *testing.T) {
	tab := &envTable{env: map[int]map[string]string{7: {
		"OPENCODE_CONFIG_DIR":      "/etc/oc",
		"HOME":                     "/home/me",
		"OPENCODE_SERVER_PASSWORD": "SECRET",
		"OPENCODE_CONFIG_CONTENT":  `{"mcp":{}}`,
	}}}
	getenv, ok := OpenCodeEnv(tab, 7)
	if !ok {
		t.Fatal("not ok")
	}
	for name, want := range map[string]string{
		"OPENCODE_CONFIG_DIR":      "/etc/oc",
		"HOME":                     "/home/me",
		"OPENCODE_CONFIG_CONTENT":  `{"mcp":{}}`,
		"XDG_CONFIG_HOME":          "",
		"OPENCODE_SERVER_PASSWORD": "",
	} {
		if got := getenv(name); got != want {
			t.Errorf("getenv(%s) = %q, want %q", name, got, want)
		}
	}
	if slices.Contains(tab.asked, "OPENCODE_SERVER_PASSWORD") {
		t.Error("the server password was read")
	}
	if !slices.Equal(tab.asked, openCodeConfigVars) {
		t.Errorf("read %v, want %v", tab.asked, openCodeConfigVars)
	}
}

// An environment that cannot be read is no environment: the caller uses
// its own.
func TestOpenCodeEnvUnreadable(t *testing.T) {
	if _, ok := OpenCodeEnv(&envTable{err: errors.New("permission denied")}, 7); ok {
		t.Error("ok with a failing reader")
	}
	var plain struct{ Table }
	if _, ok := OpenCodeEnv(plain, 7); ok {
		t.Error("ok with a table that cannot read environments")
	}
}

// A real process's variables, through this machine's table.
func TestOpenCodeEnvOfARealProcess(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no environment reader on", runtime.GOOS)
	}
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{"HOME=/nowhere/home", "OPENCODE_CONFIG=/nowhere/oc.json", "OPENCODE_CONFIG_CONTENT={\"mcp\":{}}", "OTHER=x"}
	if err := cmd.Start(); err != nil {
		missing(t, "sleep: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	tab, err := System()
	if err != nil {
		t.Fatal(err)
	}
	// The environment is the exec'd one once sleep runs.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if p, err := tab.Read(cmd.Process.Pid); err == nil && len(p.Argv) > 0 && p.Argv[0] == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	getenv, ok := OpenCodeEnv(tab, cmd.Process.Pid)
	if !ok {
		t.Fatal("not ok")
	}
	if getenv("HOME") != "/nowhere/home" || getenv("OPENCODE_CONFIG") != "/nowhere/oc.json" || getenv("OPENCODE_CONFIG_CONTENT") != `{"mcp":{}}` {
		t.Errorf("HOME %q, OPENCODE_CONFIG %q, OPENCODE_CONFIG_CONTENT %q", getenv("HOME"), getenv("OPENCODE_CONFIG"), getenv("OPENCODE_CONFIG_CONTENT"))
	}
	if getenv("OTHER") != "" || getenv("XDG_CONFIG_HOME") != "" {
		t.Errorf("OTHER %q, XDG_CONFIG_HOME %q", getenv("OTHER"), getenv("XDG_CONFIG_HOME"))
	}
	if os.Getenv("HOME") == "/nowhere/home" {
		t.Fatal("the test's own HOME is the child's: proves nothing")
	}
}
