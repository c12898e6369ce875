package registry

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestRegisterListRemove(t *testing.T) {
	r := &Registry{Dir: filepath.Join(t.TempDir(), "state", "mcp-reconnect", "daemons")}
	if got, err := r.List(); err != nil || len(got) != 0 {
		t.Fatalf("empty registry: %v %v", got, err)
	}
	now := time.Now()
	me := Entry{PID: os.Getpid(), URLs: []string{"http://127.0.0.1:4096"}, StatusAddr: "127.0.0.1:4097", Token: "t1", Version: "v", Started: now}
	remove, err := r.Register(me)
	if err != nil {
		t.Fatal(err)
	}
	// A second live daemon (our parent process stands in for it).
	other := Entry{PID: os.Getppid(), URLs: []string{"http://127.0.0.1:5000", "http://127.0.0.1:5001"}, StatusAddr: "127.0.0.1:5002", Token: "t2", Started: now.Add(time.Second)}
	removeOther, err := r.Register(other)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.List()
	if err != nil || len(got) != 2 || got[0].Token != "t1" || got[1].URLs[1] != "http://127.0.0.1:5001" {
		t.Fatalf("List = %+v, %v", got, err)
	}
	fi, _ := os.Stat(r.Dir)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(r.Dir)
	if len(ents) != 2 {
		t.Errorf("files left: %v (a temp file survived?)", ents)
	}
	for _, e := range ents {
		fi, _ := os.Stat(filepath.Join(r.Dir, e.Name()))
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
	// One daemon watches the server of a URL written another way.
	if f := slices.DeleteFunc(got, func(e Entry) bool { return !e.Watches("HTTP://127.0.0.1:5001/") }); len(f) != 1 || f[0].PID != other.PID {
		t.Errorf("watching HTTP://127.0.0.1:5001/: %+v", f)
	}
	for _, addr := range []string{"localhost:4097", "LOCALHOST:4097", ":4097", "[::ffff:127.0.0.1]:4097"} {
		if e, ok, _ := r.ByStatusAddr(addr); !ok || e.PID != me.PID {
			t.Errorf("ByStatusAddr(%q) = %+v %v", addr, e, ok)
		}
	}
	if _, ok, _ := r.ByStatusAddr("127.0.0.1:4098"); ok {
		t.Error("ByStatusAddr found a daemon at another port")
	}
	removeOther()
	remove()
	if got, _ := r.List(); len(got) != 0 {
		t.Fatalf("after remove: %+v", got)
	}
}

// A daemon that died without cleaning up (SIGKILL) leaves its file: List
// ignores it and removes it.
func TestStaleFileIgnoredAndRemoved(t *testing.T) {
	r := &Registry{Dir: t.TempDir()}
	pid := deadPID(t)
	if _, err := r.Register(Entry{PID: pid, StatusAddr: "127.0.0.1:1", Token: "dead"}); err != nil {
		t.Fatal(err)
	}
	got, err := r.List()
	if err != nil || len(got) != 0 {
		t.Fatalf("List = %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, strconv.Itoa(pid)+".json")); !os.IsNotExist(err) {
		t.Fatalf("the stale file is still there: %v", err)
	}
}

// Files that are not private, not ours or not ours to parse are skipped.
func TestForeignFilesSkipped(t *testing.T) {
	r := &Registry{Dir: t.TempDir()}
	if _, err := r.Register(Entry{PID: os.Getpid(), Token: "mine"}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(r.Dir, strconv.Itoa(os.Getpid())+".json")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.List(); len(got) != 0 {
		t.Fatalf("a world-readable file was trusted: %+v", got)
	}
	_ = os.WriteFile(p, []byte("{not json"), 0o600)
	_ = os.WriteFile(filepath.Join(r.Dir, "notes.txt"), []byte("x"), 0o600)
	if got, err := r.List(); err != nil || len(got) != 0 {
		t.Fatalf("List = %+v, %v", got, err)
	}
	// A file naming another pid than its own name is not trusted either.
	_ = os.WriteFile(p, []byte(`{"pid": 1, "token": "x"}`), 0o600)
	if got, _ := r.List(); len(got) != 0 {
		t.Fatalf("a mismatched pid was trusted: %+v", got)
	}
}

// An existing directory with loose permissions is brought to 0700.
func TestDirTightened(t *testing.T) {
	r := &Registry{Dir: filepath.Join(t.TempDir(), "d")}
	if err := os.Mkdir(r.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(Entry{PID: os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(r.Dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if r, _ := Default(); r.Dir != "/x/state/mcp-reconnect/daemons" {
		t.Errorf("Default().Dir = %q", r.Dir)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if r, _ := Default(); r.Dir != "/home/u/.local/state/mcp-reconnect/daemons" {
		t.Errorf("Default().Dir without XDG_STATE_HOME = %q", r.Dir)
	}
}

func TestNewToken(t *testing.T) {
	a, _ := NewToken()
	b, _ := NewToken()
	if len(a) != 64 || a == b || strings.Trim(a, "0123456789abcdef") != "" {
		t.Fatalf("tokens %q %q", a, b)
	}
}

// Two spellings of one OpenCode server compare equal: case, a trailing
// slash, credentials, query, the default port, localhost for 127.0.0.1,
// and the forms of one IP address.
func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4096":          "http://127.0.0.1:4096",
		"HTTP://LocalHost:4096/":         "http://127.0.0.1:4096",
		"http://u:p@127.0.0.1:4096/x":    "http://127.0.0.1:4096/x",
		" http://127.0.0.1:4096/?a=b#c ": "http://127.0.0.1:4096",
		"http://127.0.0.1":               "http://127.0.0.1:80",
		"http://:4096":                   "http://127.0.0.1:4096",
		"https://Example.COM/oc/":        "https://example.com:443/oc",
		"http://[0:0::1]:4096":           "http://[::1]:4096",
		"http://[::ffff:127.0.0.1]:4096": "http://127.0.0.1:4096",
		"not a url/":                     "not a url",
	} {
		if got := NormalizeURL(in); got != want {
			t.Errorf("NormalizeURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A registry directory that belongs to another user is refused: that
// user could read the tokens in it, or plant a file that sends reconnect
// to a status API of theirs. Needs root to give the directory away.
func TestRegistryDirOfAnotherUserIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root to give the directory to another user: CI runs as root")
		}
		t.Skip("needs root to give the directory to another user")
	}
	r := &Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	if err := os.Mkdir(r.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const other = 65534 // nobody
	if err := os.Chown(r.Dir, other, other); err != nil {
		t.Fatal(err)
	}
	_, err := r.Register(Entry{PID: os.Getpid(), StatusAddr: "127.0.0.1:1", Token: "t"})
	if err == nil || !strings.Contains(err.Error(), "another user") || !strings.Contains(err.Error(), r.Dir) {
		t.Fatalf("Register in a directory of uid %d = %v, want a refusal naming it", other, err)
	}
	if ents, _ := os.ReadDir(r.Dir); len(ents) != 0 {
		t.Fatalf("files written: %v", ents)
	}
}

// Lock excludes every other holder, in this process or another (flock),
// and leaves no file behind: the holder removes it before it unlocks, and
// a waiter that wins the removed file's lock takes the new one instead.
func TestLockExcludesAndLeavesNothing(t *testing.T) {
	r := &Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	var inside atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				unlock, err := r.Lock(RegisterLock)
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders of the registry lock at once", n)
				}
				inside.Add(-1)
				unlock()
			}
		}()
	}
	wg.Wait()
	if ents, _ := os.ReadDir(r.Dir); len(ents) != 0 {
		t.Fatalf("left in the registry: %v", ents)
	}
}

// A waiter that opened the lock file before its holder removed it wins
// the lock of a file nobody else will open: it must take the one at the
// path instead, or a newcomer would hold the lock at the same time.
func TestLockWaiterOfARemovedFileTakesTheNewOne(t *testing.T) {
	r := &Registry{Dir: filepath.Join(t.TempDir(), "daemons")}
	unlockA, err := r.Lock(RegisterLock)
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	var once sync.Once
	testHookLockOpened = func() { once.Do(func() { close(opened) }) }
	got := make(chan func(), 1)
	go func() {
		unlock, err := r.Lock(RegisterLock)
		if err != nil {
			t.Error(err)
			unlock = func() {}
		}
		got <- unlock
	}()
	<-opened // the waiter holds the file A locked, and waits
	unlockA()
	unlockB := <-got
	defer func() { testHookLockOpened = nil }()
	defer unlockB()

	f, err := os.OpenFile(filepath.Join(r.Dir, RegisterLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatal("a newcomer got the registry lock while the waiter held it (on the removed file)")
	}
}

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
