package registry

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// zombie starts a child that exits at once and is not reaped until the
// test ends: what a daemon is after it died under a parent that never
// waits (the OpenCode 2 `run` execs into opencode, which does not reap
// the daemon it left behind).
func zombie(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	pid := cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("no /proc under CI: %v", err)
			}
			t.Skipf("no /proc: %v", err)
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i+1:]), " Z") {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("child did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An exited, unreaped daemon is not running: kill(pid, 0) succeeds for a
// zombie, so `run` would find the OpenCode 2 service "watched" and start
// no daemon, and `status` would list one that does not exist.
func TestZombieDaemonIsNotRunning(t *testing.T) {
	pid := zombie(t)
	r := &Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	if _, err := r.Register(Entry{PID: pid, URLs: []string{"http://127.0.0.1:49374"}, Service: "/s/service.json", StatusAddr: "127.0.0.1:1", Token: "t"}); err != nil {
		t.Fatal(err)
	}
	got, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("List = %+v: the entry of a daemon that exited (pid %d is a zombie) counts as running", got, pid)
	}
	if _, err := os.Stat(r.path(pid)); !os.IsNotExist(err) {
		t.Fatalf("the zombie's file was kept: %v", err)
	}
}

// A file whose pid now belongs to a later process (the daemon died
// without unregistering and the pid came round again) is not a running
// daemon: the start time Register recorded differs. An entry written
// without one (an older version) is judged by its pid alone.
func TestReusedPIDIsNotRunning(t *testing.T) {
	r := &Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	me := Entry{PID: os.Getpid(), StatusAddr: "127.0.0.1:1", Token: "t"}
	if _, err := r.Register(me); err != nil {
		t.Fatal(err)
	}
	got, err := r.List()
	if err != nil || len(got) != 1 {
		t.Fatalf("List = %+v, %v", got, err)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && got[0].ProcStart == 0 {
		t.Fatal("Register recorded no start time")
	}
	if got[0].ProcStart == 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("no process start time under CI")
		}
		t.Skip("no process start time on this system")
	}

	reused := got[0]
	reused.ProcStart++
	if _, err := r.Register(reused); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.List(); len(got) != 0 {
		t.Fatalf("List = %+v: a process that started after the daemon counts as the daemon", got)
	}

	older := me
	older.ProcStart = 0
	b := `{"pid": ` + strconv.Itoa(older.PID) + `, "status_addr": "127.0.0.1:1", "token": "t"}`
	if err := os.WriteFile(r.path(older.PID), []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.List(); len(got) != 1 {
		t.Fatalf("List = %+v: an entry without a start time is dropped", got)
	}
}
