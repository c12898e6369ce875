package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// doctor against the real binary: all well → exit 0; a needs_auth server
// in a named directory → exit 1 with the hint.
func TestDoctorOnRealOpenCode(t *testing.T) {
	oc := startOpenCode(t, 0, "")
	p := newProject(t, nil)
	rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
	w := startWatch(t, oc, oc.Password, "--directory", p.Dir)
	w.WaitLog(t, "watching opencode", 15*time.Second)
	oc.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)

	doctor := func(args ...string) (int, string) {
		cmd := exec.Command(reconnectBin, append([]string{"doctor", "--url", oc.URL, "--status-addr", w.StatusAddr, "--config", ""}, args...)...)
		cmd.Env = append(cmd.Environ(), "OPENCODE_SERVER_PASSWORD="+oc.Password)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, string(out)
	}
	code, out := doctor("--directory", p.Dir)
	if code != 0 || !strings.Contains(out, "1.18.34") || !strings.Contains(out, "api routes") {
		t.Fatalf("doctor on a healthy OpenCode: exit %d\n%s", code, out)
	}
	if strings.Contains(out, oc.Password) {
		t.Fatal("doctor printed the password")
	}

	auth := newProject(t, nil)
	srv := newHTTPServer(t, auth.ServerLog("gh"), "-require-auth")
	srv.Start(t)
	rewriteProject(t, auth, map[string]any{"gh": RemoteServer(srv.URL)})
	code, out = doctor("--directory", auth.Dir)
	if code != 1 || !strings.Contains(out, "opencode mcp auth gh") {
		t.Fatalf("doctor with a needs_auth server: exit %d\n%s", code, out)
	}
}
