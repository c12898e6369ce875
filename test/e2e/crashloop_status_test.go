package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// daemonRow reads the daemon's row for server name of dir from its
// status API (GET /status, as `mcp-reconnect status` does).
func daemonRow(t testing.TB, w *Watcher, dir, name string) (status string, lastReconnect time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+w.StatusAddr+"/status", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", time.Time{}
	}
	defer resp.Body.Close()
	var st struct {
		Servers []struct {
			Directories []struct {
				Directory string `json:"directory"`
				Servers   []struct {
					Name          string    `json:"name"`
					Status        string    `json:"status"`
					LastReconnect time.Time `json:"last_reconnect"`
				} `json:"servers"`
			} `json:"directories"`
		} `json:"servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Servers {
		for _, d := range s.Directories {
			for _, r := range d.Servers {
				if d.Directory == dir && r.Name == name {
					return r.Status, r.LastReconnect
				}
			}
		}
	}
	return "", time.Time{}
}

// After the daemon repairs a crash, its status shows what OpenCode says
// within a second of OpenCode saying it, and "reconnected" dates from
// then. On the real 1.18.34: a stdio server killed three times, 3 s
// apart (its second and third repairs are a crash loop's, whose next
// attempt lies 2 and 4 s ahead); each time OpenCode's status and the
// daemon's are polled side by side.
func TestStatusFollowsOpenCodeAfterARepeatedCrash(t *testing.T) {
	oc := startOpenCode(t, 0, "")
	p := newProject(t, nil)
	rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
	w := startWatch(t, oc, oc.Password, "--directory", p.Dir)
	w.WaitLog(t, "watching opencode's MCP processes", 30*time.Second)
	p.WaitStarts(t, "s", 1, 60*time.Second)
	waitFor(t, 30*time.Second, "the daemon's row connected", func() bool { s, _ := daemonRow(t, w, p.Dir, "s"); return s == "connected" })
	time.Sleep(3 * time.Second)
	for crash := 1; crash <= 3; crash++ {
		starts := p.Starts(t, "s")
		killed := time.Now()
		killPID(t, starts[len(starts)-1])
		var saidAt, shownAt, reconnected time.Time
		for time.Since(killed) < 30*time.Second && shownAt.IsZero() {
			if saidAt.IsZero() {
				if st, err := oc.OpenCode.Status(p.Dir); err == nil && st["s"].Status == "connected" && len(p.Starts(t, "s")) > len(starts) {
					saidAt = time.Now()
				}
			}
			if s, at := daemonRow(t, w, p.Dir, "s"); s == "connected" && at.After(killed) {
				shownAt, reconnected = time.Now(), at
			}
			time.Sleep(20 * time.Millisecond)
		}
		if saidAt.IsZero() || shownAt.IsZero() {
			t.Fatalf("crash %d: OpenCode said connected %v after the kill, the daemon's row %v after (zero: never within 30 s)", crash, saidAt.Sub(killed), shownAt.Sub(killed))
		}
		lag := shownAt.Sub(saidAt)
		t.Logf("crash %d: OpenCode connected %v after the kill, the daemon's row %v later, reconnected %v after the kill",
			crash, saidAt.Sub(killed).Round(10*time.Millisecond), lag.Round(10*time.Millisecond), reconnected.Sub(killed).Round(10*time.Millisecond))
		// A second, and the two polls' own latency on a loaded machine.
		if lag > 1500*time.Millisecond {
			t.Errorf("crash %d: the daemon's row showed connected %v after OpenCode said it", crash, lag)
		}
		if d := reconnected.Sub(saidAt); d > 1500*time.Millisecond || d < -1500*time.Millisecond {
			t.Errorf("crash %d: \"reconnected\" is dated %v from when OpenCode said connected", crash, d)
		}
		time.Sleep(3 * time.Second)
	}
}
