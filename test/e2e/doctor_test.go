package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// doctor against a foreground `opencode serve --port P`, given its URL
// and password (in OPENCODE_SERVER_PASSWORD, which mcp-reconnect reads
// for either generation): checkDoctor's verdicts; a wrong password fails
// authenticated.
func TestDoctorOnRealOpenCode(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		oc := g.startOpenCode(t, 0, "")
		env := doctorEnv(t)
		checkDoctor(t, g, oc, append(env, "OPENCODE_SERVER_PASSWORD="+oc.Password), "--url", oc.URL, "--config", "")
		checkDoctorRefused(t, append(env, "OPENCODE_SERVER_PASSWORD=not-the-password"), "--url", oc.URL, "--config", "")
	})
}

// doctor with no flags, in the environment of OpenCode 2's background
// service (`serve --service`), finds it from its service.json and gives
// checkDoctor's verdicts; a service.json whose password the service
// refuses (left by an older service) fails authenticated.
func TestDoctorOnTheOpenCode2ServiceWithNoFlags(t *testing.T) {
	onlyGeneration(t, ochost.Gen2, func(t *testing.T, g gen) {
		oc := g.start(t, ochost.Options{Service: true})
		checkDoctor(t, g, oc, ochost.Env(oc.Home))

		file := oc.ServiceFile()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var svc map[string]any
		if err := json.Unmarshal(b, &svc); err != nil {
			t.Fatal(err)
		}
		svc["password"] = "not-the-service-password"
		if err := os.WriteFile(file, []byte(mustJSON(t, svc)), 0o600); err != nil {
			t.Fatal(err)
		}
		checkDoctorRefused(t, ochost.Env(oc.Home))
	})
}

// checkDoctor runs doctor with args in env against oc, healthy and
// serving a new project, and checks its verdicts: all well → exit 0, no
// FAIL line, oc the target, the version, the MCP statuses and the event stream (whose
// first event is server.connected) ok, and the password never printed;
// a project's stdio server killed → `doctor --directory D` exits 1 with
// `FAIL D: s failed: …`; a server that needs OAuth → exit 1 with the
// command that authenticates it.
func checkDoctor(t *testing.T, g gen, oc *OpenCode, env []string, args ...string) {
	t.Helper()
	p := g.newProject(t, nil)
	rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
	oc.Status(t, p.Dir) // a client uses it: its servers start
	oc.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)

	code, out := doctor(t, env, append(args, "--directory", p.Dir)...)
	for _, want := range []string{`info\s+target\s+` + regexp.QuoteMeta(oc.URL) + `: `, `ok\s+version\s+` + regexp.QuoteMeta(g.Name), `ok\s+mcp statuses\s`, `ok\s+event stream\s.*first event is server\.connected`} {
		if !hasLine(out, want) {
			t.Errorf("doctor on a healthy OpenCode: no line %q", want)
		}
	}
	if code != 0 || hasLine(out, `FAIL\s`) || t.Failed() {
		t.Fatalf("doctor on a healthy OpenCode: exit %d, want 0 and no FAIL:\n%s", code, out)
	}
	if strings.Contains(out, oc.Password) {
		t.Fatal("doctor printed the password")
	}

	p.KillConnected(t, oc, "s")
	oc.WaitStatus(t, p.Dir, "s", "failed", 30*time.Second)
	code, out = doctor(t, env, append(args, "--directory", p.Dir)...)
	if code != 1 || !hasLine(out, `FAIL\s+`+regexp.QuoteMeta(p.Dir+": s")+`\s+failed: \S`) {
		t.Fatalf("doctor with a crashed server: exit %d, want 1 and FAIL %s: s failed: …:\n%s", code, p.Dir, out)
	}

	auth := g.newProject(t, nil)
	srv := newHTTPServer(t, auth.ServerLog("gh"), "-require-auth")
	srv.Start(t)
	rewriteProject(t, auth, map[string]any{"gh": RemoteServer(srv.URL)})
	oc.Status(t, auth.Dir)
	code, out = doctor(t, env, append(args, "--directory", auth.Dir)...)
	if code != 1 || !strings.Contains(out, "opencode mcp auth gh") {
		t.Fatalf("doctor with a needs_auth server: exit %d\n%s", code, out)
	}
}

// checkDoctorRefused runs doctor with args in env, which give it a wrong
// password: exit 1, FAIL authenticated.
func checkDoctorRefused(t *testing.T, env []string, args ...string) {
	t.Helper()
	code, out := doctor(t, env, args...)
	if code != 1 || !hasLine(out, `FAIL\s+authenticated\s`) {
		t.Fatalf("doctor with a wrong password: exit %d, want 1 and FAIL authenticated:\n%s", code, out)
	}
}

// doctor runs `mcp-reconnect doctor args...` in env, from a directory of
// its own, and returns its exit code and output.
func doctor(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(reconnectBin, append([]string{"doctor"}, args...)...)
	cmd.Env, cmd.Dir = env, t.TempDir()
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// doctorEnv is the test's environment without what would name another
// OpenCode, password or daemon than the test's: the OpenCode and
// mcp-reconnect variables, and the state directory (the registry of
// running daemons, an empty one).
func doctorEnv(t *testing.T) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "OPENCODE_") && !strings.HasPrefix(name, "MCP_RECONNECT_") && name != "XDG_STATE_HOME" {
			out = append(out, kv)
		}
	}
	return append(out, "XDG_STATE_HOME="+t.TempDir())
}

// hasLine reports whether a line of out matches the regular expression
// re from its start.
func hasLine(out, re string) bool {
	return regexp.MustCompile(`(?m)^` + re).MatchString(out)
}
