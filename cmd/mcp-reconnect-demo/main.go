// Command mcp-reconnect-demo shows mcp-reconnect at work on a real OpenCode
// (`make demo`): it starts a hermetic `opencode serve` whose project has a
// stdio MCP server and a streamable-HTTP one that is down at start, runs
// `mcp-reconnect watch` beside it, crashes the stdio server, brings the
// remote one up, and prints what happens with timestamps. It cleans up
// after itself and exits within about a minute.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

var start = time.Now()

func say(format string, args ...any) {
	fmt.Printf("%6.1fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

func main() { os.Exit(run()) }

// cleanup runs its functions in reverse order, once.
type cleanup struct {
	mu  sync.Mutex
	fns []func()
}

func (c *cleanup) add(f func()) { c.mu.Lock(); c.fns = append(c.fns, f); c.mu.Unlock() }

func (c *cleanup) run() {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	for _, f := range slices.Backward(fns) {
		f()
	}
}

func run() int {
	var cl cleanup
	defer cl.run()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Println("\ninterrupted; cleaning up")
		cl.run()
		os.Exit(130)
	}()

	root, _ := os.Getwd()
	tmp, err := os.MkdirTemp("", "mcp-reconnect-demo-")
	if err != nil {
		return fail(err)
	}
	cl.add(func() { os.RemoveAll(tmp) })

	say("building mcp-reconnect (./cmd/mcp-reconnect) and the test MCP server (./test/mcpserver) with go build")
	reconnectBin, serverBin := filepath.Join(tmp, "mcp-reconnect"), filepath.Join(tmp, "mcpserver")
	for bin, pkg := range map[string]string{reconnectBin: "./cmd/mcp-reconnect", serverBin: "./test/mcpserver"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			return fail(fmt.Errorf("go build %s: %v\n%s", pkg, err, out))
		}
	}

	remotePort, err := loopback.FreePort()
	if err != nil {
		return fail(err)
	}
	project, logs := filepath.Join(tmp, "demo project"), filepath.Join(tmp, "logs")
	for _, d := range []string{project, logs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fail(err)
		}
	}
	cfg := map[string]any{"mcp": map[string]any{
		"notes":  map[string]any{"type": "local", "command": []string{serverBin, "-transport", "stdio", "-name", "notes", "-log", filepath.Join(logs, "notes.jsonl")}},
		"search": map[string]any{"type": "remote", "url": fmt.Sprintf("http://127.0.0.1:%d/mcp", remotePort)},
	}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(project, "opencode.json"), b, 0o600); err != nil {
		return fail(err)
	}

	say("starting opencode %s (hermetic: its own HOME, no network)", ochost.Version)
	oc, err := ochost.Start(ochost.Options{Binary: ochost.Binary(root)})
	if err != nil {
		return fail(err)
	}
	cl.add(oc.Kill)
	say("opencode is up at %s; the project has two MCP servers:", oc.URL)
	say("  notes  — stdio, a local process")
	say("  search — streamable HTTP on port %d, which is NOT running yet", remotePort)

	statusAddr := fmt.Sprintf("127.0.0.1:%d", must(loopback.FreePort()))
	watch := exec.Command(reconnectBin, "watch", "--url", oc.URL, "--directory", project, "--status-addr", statusAddr)
	watch.Env = append(os.Environ(), "OPENCODE_SERVER_PASSWORD="+oc.Password)
	stderr, _ := watch.StderrPipe()
	if err := watch.Start(); err != nil {
		return fail(err)
	}
	watchDone := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			say("  [mcp-reconnect] %s", trimLog(sc.Text()))
		}
		close(watchDone)
	}()
	cl.add(func() {
		_ = watch.Process.Signal(syscall.SIGTERM)
		select {
		case <-watchDone:
		case <-time.After(5 * time.Second):
			_ = watch.Process.Kill()
		}
		_ = watch.Wait()
	})
	say("started: mcp-reconnect watch --url %s --directory %q", oc.URL, project)

	st, err := oc.Status(project)
	if err != nil {
		return fail(err)
	}
	say("a client opens the project: notes is %s, search is %s (%s)", st["notes"].Status, st["search"].Status, st["search"].Error)
	say("OpenCode tried search once and will never try it again by itself.")

	ctx, stopMonitor := context.WithCancel(context.Background())
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		monitor(ctx, oc, project, st)
	}()
	cl.add(func() { stopMonitor(); <-monitorDone })

	if err := waitDaemon(reconnectBin, statusAddr, func(s map[string]string) bool { return s["search"] != "" }); err != nil {
		return fail(err)
	}
	say("`mcp-reconnect status` before the demo breaks anything. search is failed already: that was OpenCode's")
	say("own first attempt, when the project opened, before mcp-reconnect acted; ATTEMPTS counts")
	say("mcp-reconnect's own retries since:")
	printStatus(reconnectBin, statusAddr)

	pid := lastStart(filepath.Join(logs, "notes.jsonl"))
	if pid == 0 {
		return fail(fmt.Errorf("the notes server's pid is unknown"))
	}
	say("CRASH: killing the notes server (pid %d) with SIGKILL", pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if _, err := oc.WaitStatus(project, "notes", "connected", 30*time.Second); err != nil {
		return fail(err)
	}

	time.Sleep(2 * time.Second)
	say("the search server comes up on port %d", remotePort)
	remote := exec.Command(serverBin, "-transport", "http", "-addr", fmt.Sprintf("127.0.0.1:%d", remotePort), "-name", "search")
	if err := remote.Start(); err != nil {
		return fail(err)
	}
	cl.add(func() { _ = remote.Process.Kill(); _ = remote.Wait() })
	if _, err := oc.WaitStatus(project, "search", "connected", 45*time.Second); err != nil {
		return fail(err)
	}
	if err := waitDaemon(reconnectBin, statusAddr, func(s map[string]string) bool {
		return s["notes"] == "connected" && s["search"] == "connected"
	}); err != nil {
		return fail(err)
	}
	say("both servers are back. `mcp-reconnect status` after:")
	printStatus(reconnectBin, statusAddr)
	say("done; stopping everything")
	return 0
}

func printStatus(bin, addr string) {
	out, _ := exec.Command(bin, "status", "--status-addr", addr).CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("          " + line)
	}
}

// waitDaemon polls `mcp-reconnect status --json` until ok accepts the
// daemon's view (server name → status) or 40 s pass.
func waitDaemon(bin, addr string, ok func(map[string]string) bool) error {
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		out, err := exec.Command(bin, "status", "--json", "--status-addr", addr).Output()
		if err == nil {
			var st struct {
				Servers []struct {
					Directories []struct {
						Servers []struct{ Name, Status string }
					}
				}
			}
			view := map[string]string{}
			if json.Unmarshal(out, &st) == nil {
				for _, s := range st.Servers {
					for _, d := range s.Directories {
						for _, sv := range d.Servers {
							view[sv.Name] = sv.Status
						}
					}
				}
			}
			if ok(view) {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("mcp-reconnect did not report the expected state within 40 s")
}

// monitor prints every status change OpenCode reports.
func monitor(ctx context.Context, oc *ochost.OpenCode, dir string, last map[string]ochost.MCPStatus) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := oc.Status(dir)
		if err != nil {
			continue
		}
		for _, name := range []string{"notes", "search"} {
			if st[name].Status != last[name].Status {
				note := ""
				if st[name].Error != "" {
					note = " (" + st[name].Error + ")"
				}
				say("opencode: %s %s → %s%s", name, last[name].Status, st[name].Status, note)
			}
		}
		last = st
	}
}

// lastStart is the pid of the newest process in a test server's log.
func lastStart(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	pid := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev struct {
			Event string `json:"event"`
			PID   int    `json:"pid"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "start" {
			pid = ev.PID
		}
	}
	return pid
}

// trimLog drops slog's time= prefix: the demo prints its own times.
func trimLog(s string) string {
	if i := strings.Index(s, " level="); strings.HasPrefix(s, "time=") && i > 0 {
		return s[i+1:]
	}
	return s
}

func must(p int, err error) int {
	if err != nil {
		panic(err)
	}
	return p
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "demo failed:", err)
	return 1
}
