package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// health is GET /healthz or /readyz: the code and the JSON body.
func health(t *testing.T, addr, route string) (int, map[string]any) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + route)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// `watch` under a supervisor: with a fake systemd $NOTIFY_SOCKET it says
// READY=1 and pings the watchdog, through an OpenCode outage too (the
// daemon is fine; OpenCode is not); its /readyz goes 200 → 503 while the
// OpenCode it watches is down (naming it) → 200 once it is back on its
// port, while /healthz stays 200 throughout.
func TestWatchHealthAndNotify(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.newHome(t)
		oc := g.startOpenCode(t, 0, home)

		sockDir, err := os.MkdirTemp("", "mcpr-e2e-notify-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(sockDir)
		sock := filepath.Join(sockDir, "notify")
		mgr, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		defer mgr.Close()
		notes := make(chan string, 1000)
		go func() {
			buf := make([]byte, 4096)
			for {
				n, err := mgr.Read(buf)
				if err != nil {
					close(notes)
					return
				}
				notes <- string(buf[:n])
			}
		}()
		next := func(what string) string {
			t.Helper()
			select {
			case n, ok := <-notes:
				if !ok {
					t.Fatalf("notify socket closed waiting for %s", what)
				}
				return n
			case <-time.After(30 * time.Second):
				t.Fatalf("no notification within 30 s waiting for %s", what)
			}
			return ""
		}

		statusAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		logs := &ochost.Buffer{}
		cmd := exec.Command(reconnectBin, "watch", "--url", oc.URL, "--status-addr", statusAddr, "--log-level", "debug")
		cmd.Env = append(v2Env(t.TempDir(), t.TempDir()), "OPENCODE_SERVER_PASSWORD="+oc.Password, "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=1000000")
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			if strings.Contains(logs.String(), oc.Password) {
				t.Error("the password reached the watcher's output")
			}
			if t.Failed() {
				t.Logf("watch output:\n%s", logs)
			}
		}()

		if n := next("READY=1"); !strings.HasPrefix(n, "READY=1") {
			t.Fatalf("first notification %q, want READY=1\n%s", n, logs)
		}
		for range 2 {
			if n := next("a watchdog ping"); n != "WATCHDOG=1" {
				t.Fatalf("notification %q, want WATCHDOG=1", n)
			}
		}
		healthy := func() {
			t.Helper()
			if code, body := health(t, statusAddr, "/healthz"); code != http.StatusOK {
				t.Fatalf("/healthz = %d %v, want 200\n%s", code, body, logs)
			}
		}
		waitReady := func(want int, what string) map[string]any {
			t.Helper()
			var body map[string]any
			waitFor(t, 60*time.Second, what, func() bool {
				healthy()
				var code int
				code, body = health(t, statusAddr, "/readyz")
				return code == want
			})
			return body
		}

		waitReady(http.StatusOK, "/readyz 200 with OpenCode up")
		oc.Kill()
		down := waitReady(http.StatusServiceUnavailable, "/readyz 503 with OpenCode down")
		servers, _ := down["servers"].([]any)
		addr := strings.TrimPrefix(oc.URL, "http://")
		if len(servers) != 1 || !strings.Contains(fmt.Sprint(servers[0]), addr) || !strings.Contains(fmt.Sprint(servers[0]), "event stream not connected") {
			t.Fatalf("/readyz while OpenCode is down = %v, want it named, its stream down", down)
		}
		// The daemon's loops still run: the watchdog is still fed.
		for drained := false; !drained; {
			select {
			case <-notes:
			default:
				drained = true
			}
		}
		if n := next("a watchdog ping while OpenCode is down"); n != "WATCHDOG=1" {
			t.Fatalf("notification %q while OpenCode is down, want WATCHDOG=1", n)
		}
		g.start(t, ochost.Options{Port: oc.Port, Home: home, Password: oc.Password})
		waitReady(http.StatusOK, "/readyz 200 with OpenCode back")
		healthy()
	})
}
