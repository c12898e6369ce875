//go:build linux

package daemon

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// The exit watcher watches every
// child the scans find, OpenCode's other children too (s.Others: the
// commands its bash tool runs, language servers), and notes each exit
// in procWatch.exitAt "until the scan that reports it". But a scan
// reports exits only of children that serve a server (procview.Diff
// walks prev.Servers): the exit of any other child is never reported,
// so its entry is never deleted. A long-lived `opencode serve` whose
// agent runs commands grows the map by one entry per command it saw,
// for as long as that OpenCode lives; a stale entry is even taken for
// the exit time of a later server child that reuses the pid.
func TestExitTimesOfOpenCodesOtherChildrenAreForgotten(t *testing.T) {
	// An "OpenCode" whose agent runs one short command after another.
	oc := exec.Command("/bin/sh", "-c", "while :; do sleep 0.4; done")
	if err := oc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = oc.Process.Kill(); _ = oc.Wait() }()
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := procview.NewExits(); errors.Is(err, errors.ErrUnsupported) {
		missing(t, "no exit watcher here: %v", err)
	}
	r := newWatchRig()
	p := r.newWatch(t, oc.Process.Pid)
	p.table, p.newExits = tab, procview.NewExits
	r.goWatch(p, tab, oc.Process.Pid)
	defer r.stop()

	time.Sleep(12 * time.Second) // about thirty commands come and go
	p.mu.Lock()
	n := len(p.exitAt)
	p.mu.Unlock()
	if n > 1 {
		t.Errorf("after ~30 short commands of OpenCode, none serving an MCP server, the watch keeps %d exit times that no scan will ever take (want at most the one in flight)", n)
	}
}
