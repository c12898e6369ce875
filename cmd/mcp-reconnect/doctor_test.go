package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// doctor --reap with no terminal on standard input and no --yes refuses,
// naming --yes, before it lists or ends anything; --yes without --reap
// and --reap with --json are refused too. The environment cannot say yes.
// (No test here ends a process: this machine's orphans are not the
// test's.)
func TestDoctorReapRefusals(t *testing.T) {
	t.Setenv("MCP_RECONNECT_YES", "true")
	t.Setenv("MCP_RECONNECT_STATUS_ADDR", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--config", "", "--reap"}, "pass --yes"},
		{[]string{"doctor", "--config", "", "--yes"}, "--yes is for --reap"},
		{[]string{"doctor", "--config", "", "--reap", "--yes", "--json"}, "--json is not for --reap"},
	} {
		var out, errb bytes.Buffer
		root := newRoot(&out, &errb)
		root.SetIn(strings.NewReader("y\ny\n")) // not a terminal
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() != 0 {
			t.Errorf("%v: err %v, output %q; want an error saying %q", tc.args, err, out.String(), tc.want)
		}
	}
}

// With neither a URL nor a password, doctor checks the OpenCode 2
// service watch would follow: here the only one, of another channel
// (service-<hash>.json, no service.json), and says which file; with a
// service.json beside it that answers too, that one, naming the other.
func TestDoctorChecksTheServiceWatchFollows(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("MCP_RECONNECT_STATUS_ADDR", "")
	dir := filepath.Join(state, "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	serve := func(pid int) string {
		fake := fake2.New(nil)
		fake.SetPID(pid)
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	register := func(name, url string, pid int) string {
		p := filepath.Join(dir, name)
		b := fmt.Sprintf(`{"id":"x","version":%q,"url":%q,"pid":%d,"password":%q}`, fake2.DefaultVersion, url, pid, fake2.DefaultPassword)
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	check := func() map[string]string {
		t.Helper()
		_, out, errOut := runCLI(t, "doctor", "--config", "", "--json")
		var checks []struct{ Severity, Name, Detail string }
		if err := json.Unmarshal([]byte(out), &checks); err != nil {
			t.Fatalf("doctor --json: %v\n%s%s", err, out, errOut)
		}
		got := map[string]string{}
		for _, c := range checks {
			if _, ok := got[c.Name]; !ok {
				got[c.Name] = c.Severity + " " + c.Detail
			}
		}
		return got
	}

	betaURL := serve(5005)
	beta := register("service-a1047eab1035d58682a53557e0b2a75edbfd15fd.json", betaURL, 5005)
	got := check()
	if !strings.HasPrefix(got["service"], "ok "+beta+" (pid 5005") || got["reachable"] != "ok "+betaURL || !strings.Contains(got["password"], "service file "+beta) {
		t.Fatalf("only %s: service %q, reachable %q, password %q", beta, got["service"], got["reachable"], got["password"])
	}

	latestURL := serve(6006)
	latest := register("service.json", latestURL, 6006)
	got = check()
	if !strings.HasPrefix(got["service"], "ok "+latest+" (pid 6006") || !strings.Contains(got["service"], "also running, not checked here: "+beta) || got["reachable"] != "ok "+latestURL {
		t.Fatalf("with service.json too: service %q, reachable %q", got["service"], got["reachable"])
	}
}
