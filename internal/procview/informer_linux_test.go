//go:build linux

package procview

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// The exit watcher watches every child the scans find, OpenCode's other
// children too (the commands its bash tool runs, language servers), and
// notes each exit "until the scan that reports it"; but a scan reports
// exits only of children that serve a server. The exit times of the
// others must be forgotten all the same: a long-lived `opencode serve`
// whose agent runs commands would keep one per command, and a stale one
// would be taken for the exit time of a later server child reusing the
// pid.
func TestExitTimesOfOpenCodesOtherChildrenAreForgotten(t *testing.T) {
	noLeaks(t)
	// An "OpenCode" whose agent runs one short command after another.
	oc := exec.Command("/bin/sh", "-c", "while :; do sleep 0.4; done")
	if err := oc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = oc.Process.Kill(); _ = oc.Wait() }()
	tab, err := System()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewExits(); errors.Is(err, errors.ErrUnsupported) {
		missing(t, "no exit watcher here: %v", err)
	}
	v, err := NewView(tab, oc.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx, nil, Options{Exits: NewExits}) }()
	defer func() { cancel(); <-done }()

	time.Sleep(12 * time.Second) // about thirty commands come and go
	v.mu.Lock()
	n := len(v.exited)
	v.mu.Unlock()
	if n > 1 {
		t.Errorf("after ~30 short commands of OpenCode, none serving an MCP server, the view keeps %d exit times that no scan will ever take (want at most the one in flight)", n)
	}
}
