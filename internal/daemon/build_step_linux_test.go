//go:build linux

package daemon

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
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
