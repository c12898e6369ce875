//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// For a launcher that does not exit
// with its server (a shell running two programs, `npm start`, `bash
// run.sh`), the daemon watches "the server below" it: ServerProcess
// takes the launcher's oldest child, whatever it is, and the answer is
// cached for the life of the launcher. A configured command such as
// `sh -c 'npm run build; node dist/index.js'` (or `npm start` whose
// script is `tsc && node dist/index.js`) runs its build step first: a
// scan in that window (the daemon starting, a status call, the 30 s
// scan, another server's event) takes the build step for the server.
// When the build ends, as it must, the exit watcher reports "the server
// below its launcher exited", the engine sees OpenCode still say
// connected, and connects a healthy server that has just come up.
// (Here the build step is `sleep 2`, the server `sleep 600`; dash forks
// both.)
func TestAPreparationStepBelowALauncherIsNotTakenForItsServer(t *testing.T) {
	if _, err := exec.LookPath("dash"); err != nil {
		missing(t, "no dash: %v", err)
	}
	if _, err := procview.NewExits(); errors.Is(err, errors.ErrUnsupported) {
		missing(t, "no exit watcher here: %v", err)
	}
	dir := t.TempDir()
	script := "sleep 2; sleep 600"
	cmd := []string{"dash", "-c", script}
	oc := &connectedOC{cmd: cmd}
	r := newWatchRig()
	defer r.stop()
	r.runEngine(t, oc, dir)
	time.Sleep(2 * time.Second) // armed, its config and status read: connected

	// "OpenCode": it starts the server's command as its child.
	root := exec.Command("dash", "-c", "dash -c '"+script+"'; :")
	root.Dir = dir
	root.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := root.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-root.Process.Pid, syscall.SIGKILL) // its own group: the child and its steps too
		_ = root.Wait()
	})
	time.Sleep(500 * time.Millisecond) // the child has exec'd; its build step runs
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	p := r.newWatch(t, root.Process.Pid)
	p.newExits = procview.NewExits
	r.goWatch(p, tab, root.Process.Pid)

	time.Sleep(5 * time.Second) // the build step ends; `sleep 600`, the server, runs on
	info := p.info()
	if info == nil || info.Children != 1 {
		t.Fatalf("setup: the view does not see the server's launcher: %+v", info)
	}
	n := oc.connectCount()
	if n != 0 {
		t.Errorf("%d connects of a connected server whose launcher and server both run: its build step was taken for its server, and its normal end for a crash (status shows server %d %q)", n, info.Servers[0].ServerPID, info.Servers[0].ServerCommand)
	}
}

// shellOC is an OpenCode before 1.15 as the engine sees it: status
// stays "connected" whatever happens to the child, and a connect makes
// OpenCode (a real process, a shell reading its stdin) start a new child
// running the configured command, and returns once that child runs.
type shellOC struct {
	cmd   []string
	ocPID int
	in    io.Writer

	mu         sync.Mutex
	connects   int
	connectAt  []time.Time
	spawnedPID []int
}

func (o *shellOC) MCPStatus(context.Context, string) (map[string]opencode.MCPServerStatus, error) {
	return map[string]opencode.MCPServerStatus{"s": {Status: opencode.StatusConnected}}, nil
}

func (o *shellOC) MCPConfig(context.Context, string) (map[string]opencode.MCPEntry, error) {
	return map[string]opencode.MCPEntry{"s": {Type: "local", Command: o.cmd}}, nil
}

func (o *shellOC) Connect(context.Context, string, string) error {
	at := time.Now()
	pid, err := o.spawn()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.connects++
	o.connectAt = append(o.connectAt, at)
	o.spawnedPID = append(o.spawnedPID, pid)
	return err
}

// children lists the shell's children.
func (o *shellOC) children() []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", o.ocPID, o.ocPID))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// spawn makes "OpenCode" start one more child and waits until it has
// exec'd the configured command (OpenCode's connect returns after the
// MCP handshake, later still).
func (o *shellOC) spawn() (int, error) {
	before := o.children()
	if _, err := io.WriteString(o.in, "x\n"); err != nil {
		return 0, err
	}
	for range 400 {
		for _, c := range o.children() {
			if slices.Contains(before, c) {
				continue
			}
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
			if strings.HasPrefix(string(b), o.cmd[0]+"\x00") {
				return c, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, errors.New("no child started")
}

func (o *shellOC) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.connects
}

// On OpenCode before 1.15 a dead stdio child is never reported: the
// process view's exit is the only crash report, and the engine drops the
// exit of a child born before its last connect of the server (that
// connect replaced it). On the real process table of this machine: the
// child the engine's own repair started is born after that repair's
// connect, so when it crashes in turn it is repaired too. (Start times
// computed from /proc/stat's btime, whole seconds, are early by the
// boot's fraction of a second, and set against the wall-clock time of the
// connect they made that child look older than it: the second crash was
// never repaired.)
func TestSecondCrashAfterARepairIsRepaired(t *testing.T) {
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := procview.NewExits(); errors.Is(err, errors.ErrUnsupported) {
		missing(t, "no exit watcher here: %v", err)
	}
	dir := t.TempDir()
	sh := exec.Command("/bin/sh", "-c", "while read l; do sleep 1000 & done")
	sh.Dir = dir
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	oc := &shellOC{cmd: []string{"sleep", "1000"}, ocPID: sh.Process.Pid, in: stdin}
	defer func() {
		for _, c := range oc.children() {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
		_ = stdin.Close()
		_ = sh.Process.Kill()
		_ = sh.Wait()
	}()
	first, err := oc.spawn() // the child OpenCode started by itself
	if err != nil {
		t.Fatal(err)
	}

	r := newWatchRig()
	cfg := reconnect.DefaultConfig
	cfg.Backoff.Jitter = 0
	cfg.StableAfter = 2 * time.Second
	eng, err := reconnect.New(cfg, oc, reconnect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = eng.Arm(dir, reconnect.ArmedByFlag)
	r.eng = eng
	r.wg.Add(1)
	go func() { defer r.wg.Done(); _ = eng.Run(r.ctx) }()
	p := r.newWatch(t, sh.Process.Pid)
	p.newExits = procview.NewExits
	r.goWatch(p, tab, sh.Process.Pid)
	defer r.stop()

	waitFor := func(n int, within time.Duration) bool {
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if oc.count() >= n {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}

	time.Sleep(4 * time.Second) // armed, config read, the child seen, stable
	_ = syscall.Kill(first, syscall.SIGKILL)
	if !waitFor(1, 6*time.Second) {
		t.Fatalf("setup: the first crash (pid %d) was not repaired", first)
	}
	oc.mu.Lock()
	second, connectAt := oc.spawnedPID[0], oc.connectAt[0]
	oc.mu.Unlock()
	st, err := tab.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the repair's connect began at %s; the child it made (pid %d) started, by btime and its ticks, at %s (%+v after the connect)",
		connectAt.Format("15:04:05.000"), second, st.Start.Format("15:04:05.000"), st.Start.Sub(connectAt))

	time.Sleep(4 * time.Second) // stable again
	_ = syscall.Kill(second, syscall.SIGKILL)
	if !waitFor(2, 8*time.Second) {
		t.Errorf("the child started by the daemon's own repair (pid %d) crashed 8 s ago and was never reconnected (connects: %d)", second, oc.count())
	}
}
