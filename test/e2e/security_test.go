package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// postReconnect sends POST /reconnect {"directory": dir} to addr with the
// given Host and headers and returns the status code.
func postReconnect(t *testing.T, addr, host, dir string, hdr map[string]string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/reconnect", strings.NewReader(mustJSON(t, map[string]string{"directory": dir})))
	req.Header.Set("Content-Type", "application/json")
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func reconnectCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(reconnectBin, args...)
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

// SPEC 13: arming a directory makes OpenCode run the commands its config
// names. Without the daemon's token (or with a rebinding Host) POST
// /reconnect starts nothing; the reconnect command, which reads the token
// from the registry, does. With two daemons running, status lists both,
// reconnect refuses to guess and --url picks; a daemon killed with SIGKILL
// leaves a file the next status ignores and removes. On both
// generations: what a refused request must not start is OpenCode's.
func TestStatusAPINeedsTokenAndRegistry(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		state := t.TempDir()
		t.Setenv("XDG_STATE_HOME", state) // the daemons' and the commands' registry
		oc := g.startOpenCode(t, 0, "")
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"marker": p.StdioServer("marker")})
		marker := p.ServerLog("marker") // the server writes it when it starts
		w := startWatch(t, oc, oc.Password)
		w.WaitLog(t, "status api listening", 30*time.Second)

		regDir := filepath.Join(state, "mcp-reconnect", "daemons")
		ents, _ := os.ReadDir(regDir)
		if len(ents) != 1 {
			t.Fatalf("registry holds %v, want one daemon", ents)
		}
		for path, want := range map[string]os.FileMode{regDir: 0o700, filepath.Join(regDir, ents[0].Name()): 0o600} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: %v, want mode %v", path, err, want)
			}
		}

		_, port, _ := strings.Cut(w.StatusAddr, ":")
		for name, c := range map[string]struct {
			host string
			hdr  map[string]string
			want int
		}{
			"no token":      {"", nil, 401},
			"wrong token":   {"", map[string]string{"Authorization": "Bearer 0000"}, 401},
			"DNS rebinding": {"attacker.example:" + port, map[string]string{"Origin": "http://attacker.example:" + port}, 403},
		} {
			if code := postReconnect(t, w.StatusAddr, c.host, p.Dir, c.hdr); code != c.want {
				t.Errorf("%s: POST /reconnect = %d, want %d", name, code, c.want)
			}
		}
		// OpenCode spawns a stdio server well within 3 s of a status read
		// (2.x boots the location of any directory-scoped request).
		time.Sleep(3 * time.Second)
		if _, err := os.Stat(marker); !os.IsNotExist(err) {
			t.Fatalf("a refused request started the directory's MCP server (%s: %v)", marker, err)
		}
		if st := w.StatusJSON(t); strings.Contains(mustJSON(t, st), p.Dir) {
			t.Fatal("a refused request armed the directory")
		}

		// A second daemon, for an OpenCode that is not up.
		other := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
		w2 := startWatch(t, &OpenCode{OpenCode: &ochost.OpenCode{URL: other, Password: "pw2"}}, "pw2")
		w2.WaitLog(t, "status api listening", 30*time.Second)
		code, out := reconnectCLI(t, "status")
		if code != 0 || !strings.Contains(out, oc.URL) || !strings.Contains(out, other) {
			t.Fatalf("status with two daemons: exit %d\n%s", code, out)
		}
		code, out = reconnectCLI(t, "reconnect", "--directory", p.Dir)
		if code == 0 || !strings.Contains(out, "several") {
			t.Fatalf("reconnect with two daemons: exit %d\n%s", code, out)
		}
		code, out = reconnectCLI(t, "reconnect", "--url", oc.URL, "--directory", p.Dir)
		if code != 0 || !strings.Contains(out, "reconnect scheduled") {
			t.Fatalf("reconnect --url: exit %d\n%s", code, out)
		}
		p.WaitStarts(t, "marker", 1, 30*time.Second)

		_ = w2.cmd.Process.Signal(syscall.SIGKILL)
		<-w2.done
		stale := filepath.Join(regDir, strconv.Itoa(w2.cmd.Process.Pid)+".json")
		if _, err := os.Stat(stale); err != nil {
			t.Fatalf("the killed daemon left no file: %v", err)
		}
		code, out = reconnectCLI(t, "status")
		if code != 0 || strings.Contains(out, other) || !strings.Contains(out, p.Dir) {
			t.Fatalf("status after SIGKILL: exit %d\n%s", code, out)
		}
		if _, err := os.Stat(stale); !os.IsNotExist(err) {
			t.Fatalf("status did not remove the stale file: %v", err)
		}
		// One daemon again: reconnect needs no choice.
		if code, out := reconnectCLI(t, "reconnect", "--directory", p.Dir); code != 0 {
			t.Fatalf("reconnect: exit %d\n%s", code, out)
		}
	})
}

// ptyRun runs `mcp-reconnect run [flags] -- command...` under a
// pseudo-terminal from dir and returns its screen, the wait for its exit
// code, and the wrapper's log file.
func ptyRun(t *testing.T, dir string, env []string, command ...string) (*ochost.Buffer, *os.File, func(time.Duration) int, string) {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	logFile := filepath.Join(t.TempDir(), "run.log")
	args := append([]string{"run", "--log-level", "debug", "--log-file", logFile, "--status-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--"}, command...)
	cmd := exec.Command(reconnectBin, args...)
	home := hermeticHome(t)
	cmd.Env = append(append(ochost.Env(home), "TERM=xterm-256color"), env...)
	cmd.Dir = dir
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	screen := &ochost.Buffer{}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(screen, tty); close(copied) }()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		tty.Close()
		<-copied
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("screen:\n%s\nwrapper log:\n%s", screen, b)
		}
	})
	wait := func(timeout time.Duration) int {
		t.Helper()
		select {
		case <-done:
			return cmd.ProcessState.ExitCode()
		case <-time.After(timeout):
			t.Fatalf("wrapper still running after %v", timeout)
			return -1
		}
	}
	return screen, tty, wait, logFile
}

func waitScreen(t *testing.T, screen *ochost.Buffer, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(screen.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("screen lacks %q within %v:\n%s", s, timeout, screen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ctrl-\ reaches the child as without the wrapper; the wrapper prints
// nothing (no goroutine dump) and exits with the child's code. The child
// is a shell, not OpenCode: signal relay and the terminal are the
// wrapper's alone, whatever the generation.
func TestRunCtrlBackslashReachesChild(t *testing.T) {
	script := `trap 'echo child-got-SIGQUIT; exit 7' QUIT; echo child-ready; while :; do sleep 0.05; done`
	screen, tty, wait, _ := ptyRun(t, t.TempDir(), nil, "sh", "-c", script)
	waitScreen(t, screen, "child-ready", 20*time.Second)
	_, _ = tty.Write([]byte{0x1c}) // Ctrl-\
	waitScreen(t, screen, "child-got-SIGQUIT", 10*time.Second)
	if code := wait(10 * time.Second); code != 7 {
		t.Errorf("wrapper exit code = %d, want the child's 7", code)
	}
	time.Sleep(100 * time.Millisecond) // the last bytes of the pty
	for _, bad := range []string{"goroutine", "SIGQUIT: quit", "mcp-reconnect", "level="} {
		if strings.Contains(screen.String(), bad) {
			t.Errorf("the wrapper printed %q over the child:\n%s", bad, screen)
		}
	}
}

// fakeOpenCode builds a stand-in for opencode 1.x: it prints its
// arguments; with --port it serves /global/health, unless the port is
// taken, when it fails as `opencode serve` does (exit 1 after 1.5 s with
// ServeError). `fake __spawn PORT` has a detached process (not its
// descendant) take PORT and write its pid to $FAKE_OC_STEAL/holder.pid,
// as another program racing the wrapper would; with $FAKE_OC_STEAL set,
// its own first serve does that first.
func fakeOpenCode(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := `package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	args := os.Args[1:]
	if len(args) == 2 && args[0] == "__spawn" { // detach the holder
		cmd := exec.Command(os.Args[0], "__hold", args[1])
		_ = cmd.Start()
		return
	}
	if len(args) == 2 && args[0] == "__hold" {
		l, err := net.Listen("tcp", "127.0.0.1:"+args[1])
		if err == nil {
			os.WriteFile(filepath.Join(os.Getenv("FAKE_OC_STEAL"), "holder.pid"), []byte(fmt.Sprint(os.Getpid())), 0o600)
			time.Sleep(60 * time.Second)
			l.Close()
		}
		return
	}
	fmt.Println("ARGS:", strings.Join(args, " "))
	port := ""
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			port = args[i+1]
		}
	}
	if port == "" {
		return
	}
	if steal := os.Getenv("FAKE_OC_STEAL"); steal != "" {
		flag := filepath.Join(steal, "stolen")
		if _, err := os.Stat(flag); err != nil {
			os.WriteFile(flag, nil, 0o600)
			_ = exec.Command(os.Args[0], "__spawn", port).Run()
			for i := 0; i < 100; i++ {
				if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
					c.Close()
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		time.Sleep(1500 * time.Millisecond)
		fmt.Fprintln(os.Stderr, "Error: Unexpected error\n\nServeError")
		os.Exit(1)
	}
	http.HandleFunc("/global/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, ` + "`" + `{"healthy":true,"version":"1.18.34"}` + "`" + `)
	})
	fmt.Println("fake opencode listening on", port)
	_ = http.Serve(l, nil)
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin", "opencode")
	cmd := exec.Command("go", "build", "-o", bin, "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the fake opencode: %v\n%s", err, out)
	}
	return bin
}

// `opencode models` in a repository holding a models/ folder is the models
// subcommand: it gets no --port (the old check stat'ed its arguments).
// 1.x only: a 1.x subcommand that is no server runs as it is, and run
// adds a port only to a server; a 2.x subcommand attaches to the
// background service instead, which is what run does for 2.x
// (TestRunOnOpenCode2StartsOneServiceWatch).
func TestRunSubcommandInFolderOfItsNameGetsNoPort(t *testing.T) {
	oc := fakeOpenCode(t)
	repo := t.TempDir()
	for _, d := range []string{"models", "run"} {
		if err := os.Mkdir(filepath.Join(repo, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"models"}, {"run", "hello"}} {
		screen, _, wait, _ := ptyRun(t, repo, nil, append([]string{oc}, args...)...)
		if code := wait(20 * time.Second); code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		waitScreen(t, screen, "ARGS: "+strings.Join(args, " "), 5*time.Second)
		if strings.Contains(screen.String(), "--port") {
			t.Fatalf("%v got a port:\n%s", args, screen)
		}
	}
}

// A port another program takes between the wrapper's choice and OpenCode's
// start is recovered, on both generations: the real OpenCode fails to
// bind it (both print ServeError and exit 1), is started again on another
// port, and the user sees no error. OpenCode runs through a script of the
// user's, the first of whose serves has another program take the port
// first.
func TestRunRecoversTakenPort(t *testing.T) {
	holder := fakeOpenCode(t) // only the port's other program
	forEachGeneration(t, func(t *testing.T, g gen) {
		steal := t.TempDir()
		t.Cleanup(func() {
			if b, err := os.ReadFile(filepath.Join(steal, "holder.pid")); err == nil {
				if pid, err := strconv.Atoi(string(b)); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
		starts := filepath.Join(steal, "starts")
		script := `#!/bin/sh
port=; prev=
for a in "$@"; do [ "$prev" = --port ] && port=$a; prev=$a; done
if [ -n "$port" ]; then
	echo "$port" >> ` + shellquote.Quote(starts) + `
	if [ ! -e ` + shellquote.Quote(filepath.Join(steal, "stolen")) + ` ]; then
		: > ` + shellquote.Quote(filepath.Join(steal, "stolen")) + `
		FAKE_OC_STEAL=` + shellquote.Quote(steal) + ` ` + shellquote.Quote(holder) + ` __spawn "$port"
		i=0
		while [ ! -s ` + shellquote.Quote(filepath.Join(steal, "holder.pid")) + ` ] && [ $i -lt 250 ]; do sleep 0.02; i=$((i+1)); done
	fi
fi
exec ` + shellquote.Quote(g.Bin) + ` "$@"
`
		oc := filepath.Join(t.TempDir(), "opencode")
		if err := os.WriteFile(oc, []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
		screen, _, _, logFile := ptyRun(t, t.TempDir(), nil, oc, "serve")
		waitFile(t, logFile, "starting it on another", 60*time.Second)
		waitFile(t, logFile, "watching opencode", 60*time.Second)
		if b, _ := os.ReadFile(filepath.Join(steal, "holder.pid")); len(b) == 0 {
			t.Fatal("no other program took the port")
		}
		if strings.Contains(screen.String(), "ServeError") {
			t.Fatalf("the user saw the taken port:\n%s", screen)
		}
		b, _ := os.ReadFile(starts)
		if ports := strings.Fields(string(b)); len(ports) != 2 || ports[0] == ports[1] {
			t.Fatalf("serves on ports %v, want 2 on two ports", ports)
		}
	})
}
