package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// An orphan made on purpose: OpenCode runs under `run`, starts a stdio
// server that outlives its parent (test/mcpserver -linger: the server
// process itself stays, as a real one that ignores stdin's EOF does;
// a shell wrapper would leave the shell, not the server), and is
// SIGKILLed; the wrapper exits with it. With neither OpenCode nor a
// daemon left, doctor lists the orphan (pid, masked command) and fails;
// doctor --reap refuses without a terminal and without --yes; doctor
// --reap --yes, given no directory, finds it by its own working
// directory and ends it, and nothing else: not the same command run by
// this test (its parent lives), not an unrelated process that init
// adopted in the same directory. Afterwards doctor is clean of it.
func TestDoctorReapsAnOrphanLeftByRun(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.newHome(t)
		p := g.newProject(t, nil)
		// The name is a secret-ish assignment: the command is shown masked.
		const secret = "e2e-sekrit-value"
		command := []string{mcpServerBin, "-transport", "stdio", "-name", "api_key=" + secret, "-log", p.ServerLog("lingers"), "-linger", "10m"}
		rewriteProject(t, p, map[string]any{"lingers": map[string]any{"type": "local", "command": command}})
		port := freePort(t)
		const password = "orphan-e2e-password"
		// Started as a shell starts a job: in a process group of its own,
		// which 1.x OpenCode and its children join (2.x puts each child in a
		// group of its own). The record the wrapper's daemon keeps names
		// that group (led by the wrapper), OpenCode and each MCP process
		// its scans saw under it: once OpenCode is gone, that is what proves
		// the server its orphan (on 2.x the sighting alone can).
		w := startRunAs(t, &syscall.SysProcAttr{Setpgid: true}, home, p.Dir, []string{"OPENCODE_SERVER_PASSWORD=" + password}, nil, g.Bin, "serve", "--port", fmt.Sprint(port))
		w.waitLog(t, "watching opencode", 60*time.Second)
		oc := &OpenCode{OpenCode: &ochost.OpenCode{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Password: password, Gen: g.Gen}}
		oc.WaitStatus(t, p.Dir, "lingers", "connected", 60*time.Second) // a status read of the directory starts it
		starts := p.Starts(t, "lingers")
		if len(starts) != 1 {
			t.Fatalf("server starts %v, want one", starts)
		}
		orphan := starts[0]
		t.Cleanup(func() { killIfMentions(orphan, p.LogDir) })
		waitRecorded(t, filepath.Join(home, "state"), orphan)

		// The same command, started by this test: its parent lives.
		same := exec.Command(command[0], command[1:]...)
		same.Dir = p.Dir
		stdin, err := same.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := same.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stdin.Close(); _ = same.Process.Kill(); _ = same.Wait() })
		// An unrelated process that init adopts, in the project directory.
		secs := fmt.Sprintf("600.%d", os.Getpid())
		echoed, err := exec.Command("sh", "-c", `cd "$1" && sleep "$2" >/dev/null 2>&1 & echo $!`, "sh", p.Dir, secs).Output()
		if err != nil {
			t.Fatal(err)
		}
		sleeper, err := strconv.Atoi(strings.TrimSpace(string(echoed)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { killIfMentions(sleeper, secs) })

		kids := childPIDs(w.cmd.Process.Pid)
		if len(kids) != 1 {
			t.Fatalf("wrapper children = %v, want the one opencode", kids)
		}
		if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if code := w.wait(t, 15*time.Second); code != 128+9 {
			t.Fatalf("wrapper exit code = %d, want 137", code)
		}
		// Adopted by init once OpenCode is gone.
		deadline := time.Now().Add(5 * time.Second)
		for ppid, _ := parentOf(orphan); ppid != 1; ppid, _ = parentOf(orphan) {
			if time.Now().After(deadline) {
				_, comm := parentOf(ppid)
				t.Fatalf("the server %d has parent %d (%s) 5 s after OpenCode's death, not init (gone if 0): doctor proves an orphan only when init or systemd adopted it", orphan, ppid, comm)
			}
			time.Sleep(20 * time.Millisecond)
		}

		statusAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // no daemon there
		doctor := func(args ...string) (int, string) {
			t.Helper()
			cmd := exec.Command(reconnectBin, append([]string{"doctor", "--config", "", "--url", oc.URL, "--status-addr", statusAddr}, args...)...)
			cmd.Env = ochost.Env(home)
			cmd.Dir = home
			b, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			t.Logf("doctor %s: exit %d\n%s", strings.Join(args, " "), code, b)
			if strings.Contains(string(b), secret) {
				t.Fatalf("doctor showed the secret in the command line:\n%s", b)
			}
			return code, string(b)
		}
		listed := func(out string, pid int) bool {
			return regexp.MustCompile(`(?m)^warn\s+orphan pid ` + strconv.Itoa(pid) + `\s`).MatchString(out)
		}

		code, out := doctor("--directory", p.Dir)
		if !listed(out, orphan) {
			recs, _ := filepath.Glob(filepath.Join(home, "state", "mcp-reconnect", "processes", "*"))
			for _, r := range recs {
				b, _ := os.ReadFile(r)
				t.Logf("record %s: %s", r, b)
			}
		}
		if code == 0 || !listed(out, orphan) || !strings.Contains(out, "api_key=***") || !strings.Contains(out, "mcp-reconnect doctor --reap") {
			t.Fatalf("doctor does not list the orphan %d with its masked command and the fix, or exits 0", orphan)
		}
		if listed(out, same.Process.Pid) || listed(out, sleeper) {
			t.Fatalf("doctor lists a process that is no orphan of a server (%d, %d)", same.Process.Pid, sleeper)
		}

		code, out = doctor("--reap")
		if code == 0 || !strings.Contains(out, "pass --yes") || !alive(orphan) {
			t.Fatalf("doctor --reap without a terminal and without --yes: exit %d, the orphan alive: %v", code, alive(orphan))
		}

		code, out = doctor("--reap", "--yes")
		if code != 0 || !regexp.MustCompile(`(?m)^ended pid `+strconv.Itoa(orphan)+` .* with SIGTERM after `).MatchString(out) {
			t.Fatalf("doctor --reap --yes: exit %d, did not end %d with SIGTERM", code, orphan)
		}
		deadline = time.Now().Add(5 * time.Second)
		for alive(orphan) {
			if time.Now().After(deadline) {
				t.Fatalf("the orphan %d still runs 5 s after doctor ended it", orphan)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for what, pid := range map[string]int{"the same command with a live parent": same.Process.Pid, "the unrelated adopted sleep": sleeper} {
			if !alive(pid) || strings.Contains(out, fmt.Sprintf("pid %d ", pid)) {
				t.Errorf("doctor --reap touched %s (%d)", what, pid)
			}
		}

		code, out = doctor("--directory", p.Dir)
		if listed(out, orphan) || code == 0 { // still not 0: OpenCode is gone
			t.Fatalf("doctor after the reap: exit %d, still lists %d", code, orphan)
		}
	})
}

// parentOf returns pid's parent and its name; 0 when pid is gone.
func parentOf(pid int) (int, string) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, ""
	}
	s := string(b)
	l, r := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	var state string
	var ppid int
	if l < 0 || r < l {
		return 0, ""
	}
	if _, err := fmt.Sscanf(s[r+2:], "%s %d", &state, &ppid); err != nil || state == "Z" {
		return 0, ""
	}
	return ppid, s[l+1 : r]
}

// alive reports whether pid runs (not gone, not a zombie).
func alive(pid int) bool {
	ppid, _ := parentOf(pid)
	return ppid != 0
}

// killIfMentions kills pid if its command line still mentions marker
// (so a pid reused since is left alone).
func killIfMentions(pid int, marker string) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err == nil && strings.Contains(string(b), marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// startUnreaped starts OpenCode of release g on a free port in home, as
// a shell with job control starts a job (in a process group of its own,
// which it leads), and does not wait for it until the test ends: killed
// meanwhile, it stays a zombie, as under a parent that has not reaped it
// yet (a busy shell, a supervisor that waits later). 2.x falls back on
// OPENCODE_SERVER_PASSWORD, so one variable serves both generations.
func (g gen) startUnreaped(t *testing.T, home, dir string) (*OpenCode, int) {
	t.Helper()
	needBinary(t, g.Bin, g.Name)
	port := freePort(t)
	password := fmt.Sprintf("unreaped-%d", port)
	cmd := exec.Command(g.Bin, "serve", "--port", strconv.Itoa(port), "--hostname", "127.0.0.1")
	cmd.Env = append(ochost.Env(home), "OPENCODE_SERVER_PASSWORD="+password)
	cmd.Dir = dir
	out := &ochost.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		// 2.x starts each MCP child in a group of its own: end those too.
		for _, c := range childPIDs(pid) {
			if pgid, err := syscall.Getpgid(c); err == nil && pgid == c {
				_ = syscall.Kill(-c, syscall.SIGKILL)
			}
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("opencode output:\n%s", out)
		}
	})
	oc := &OpenCode{OpenCode: &ochost.OpenCode{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port, Password: password, Home: home, Gen: g.Gen, Output: out}, bin: g.Bin}
	if err := oc.WaitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	return oc, pid
}

// isZombie reports whether pid is a zombie: exited, not yet reaped.
func isZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && strings.HasPrefix(s[i+1:], " Z ")
}

// waitRecorded waits until a daemon's record of MCP processes (under
// state) holds pid: what proves, once its OpenCode is gone, that pid
// was OpenCode's.
func waitRecorded(t *testing.T, state string, pid int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("pid %d in the record of MCP processes", pid), func() bool {
		files, _ := filepath.Glob(filepath.Join(state, "mcp-reconnect", "processes", "*.json"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.Contains(string(b), fmt.Sprintf(`"pid":%d,`, pid)) {
				return true
			}
		}
		return false
	})
}

// runDoctor runs `doctor` against url (gone by then) in home's
// environment, and returns its exit code and output.
func runDoctor(t *testing.T, home, url string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(reconnectBin, append([]string{"doctor", "--config", "", "--url", url}, args...)...)
	cmd.Env = ochost.Env(home)
	cmd.Dir = home
	b, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("doctor %s: exit %d\n%s", strings.Join(args, " "), code, b)
	return code, string(b)
}

// The acceptance of an orphan on evidence, not on its parent, with an
// OpenCode that is killed and not reaped: OpenCode runs as a user would
// start it (its own process group), watched by a daemon, with a server
// whose command leaves a shell behind (`sh -c '…; sleep 600'`: the
// server exits on its stdin's EOF, the shell then sleeps), and is
// SIGKILLed; its parent (this test) does not reap it until the end, so
// it stays a zombie. The same command line also runs started with
// setsid from the project directory, adopted by init too: what a user
// service, systemd-run, nohup or tmux does, and what every MCP child of
// 2.x looks like (each leads a group of its own and carries no
// OPENCODE_PID: facts §7). doctor lists the orphan as proven (the daemon
// saw it under that OpenCode, which is gone: a zombie runs nothing), the
// twin as possibly left over because it leads its own group; doctor
// --reap --yes ends the orphan (the shell and its sleep) and leaves the
// twin alive.
func TestDoctorReapsAKilledOpenCodesOrphanAndSparesASetsidTwin(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.newHome(t)
		state := filepath.Join(home, "state")
		t.Setenv("XDG_STATE_HOME", state) // the watch's record, which doctor reads
		p := g.newProject(t, nil)
		marker := fmt.Sprintf("600.%d", os.Getpid())
		script := fmt.Sprintf("%s -transport stdio -name left -log %s; sleep %s", mcpServerBin, shellquote.Quote(p.ServerLog("left")), marker)
		rewriteProject(t, p, map[string]any{"left": map[string]any{"type": "local", "command": []string{"sh", "-c", script}}})
		oc, ocPID := g.startUnreaped(t, home, home)
		w := startWatch(t, oc, oc.Password)
		w.WaitLog(t, "watching opencode", 30*time.Second)
		oc.WaitStatus(t, p.Dir, "left", "connected", 60*time.Second)
		if starts := p.Starts(t, "left"); len(starts) != 1 {
			t.Fatalf("server starts %v, want one", starts)
		}
		shells := childPIDs(ocPID)
		if len(shells) != 1 {
			t.Fatalf("OpenCode's children %v, want the one shell", shells)
		}
		orphan := shells[0]
		t.Cleanup(func() { killIfMentions(orphan, marker) })
		waitRecorded(t, state, orphan)

		// The twin: the same command line, from the project directory, in a
		// session of its own, adopted by init once its starter exits.
		out, err := exec.Command("sh", "-c", `cd "$1" && setsid sh -c "$2" </dev/null >/dev/null 2>&1 & echo $!`, "sh", p.Dir, script).Output()
		if err != nil {
			t.Fatal(err)
		}
		twin, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, c := range childPIDs(twin) { // its sleep, which outlives it
				killIfMentions(c, marker)
			}
			killIfMentions(twin, marker)
		})

		if err := syscall.Kill(ocPID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var sleeper int
		waitFor(t, 10*time.Second, "the orphaned shell adopted and sleeping", func() bool {
			ppid, _ := parentOf(orphan)
			kids := childPIDs(orphan)
			if ppid == ocPID || ppid == 0 || len(kids) != 1 {
				return false
			}
			sleeper = kids[0]
			return true
		})
		t.Cleanup(func() { killIfMentions(sleeper, marker) })
		waitFor(t, 10*time.Second, "the twin adopted", func() bool {
			ppid, _ := parentOf(twin)
			return ppid != 0 && len(childPIDs(twin)) == 1
		})
		if !isZombie(ocPID) {
			t.Fatalf("OpenCode %d is not a zombie: the test reaped it, or it still runs", ocPID)
		}

		_, listing := runDoctor(t, home, oc.URL, "--directory", p.Dir)
		if !regexp.MustCompile(`(?m)^warn\s+orphan pid ` + strconv.Itoa(orphan) + `\s.*which is gone`).MatchString(listing) {
			t.Fatalf("doctor does not prove the orphan %d of the killed OpenCode %d (a zombie)", orphan, ocPID)
		}
		if regexp.MustCompile(`(?m)^warn\s+orphan pid ` + strconv.Itoa(twin) + `\s`).MatchString(listing) {
			t.Fatalf("doctor calls the setsid twin %d an orphan", twin)
		}
		if !regexp.MustCompile(`(?m)^warn\s+possibly left over pid ` + strconv.Itoa(twin) + `\s.*leads its own process group`).MatchString(listing) {
			t.Fatalf("doctor does not say why the setsid twin %d is not proven", twin)
		}
		code, reaped := runDoctor(t, home, oc.URL, "--reap", "--yes", "--directory", p.Dir)
		if code != 0 || !regexp.MustCompile(`(?m)^ended pid `+strconv.Itoa(orphan)+` `).MatchString(reaped) {
			t.Fatalf("doctor --reap --yes: exit %d, did not end %d", code, orphan)
		}
		waitFor(t, 10*time.Second, "the orphan and its sleep gone", func() bool { return !alive(orphan) && !alive(sleeper) })
		if !alive(twin) {
			t.Fatalf("doctor --reap --yes ended the setsid twin %d", twin)
		}
		if kids := childPIDs(twin); len(kids) != 1 || !alive(kids[0]) {
			t.Fatalf("the twin's sleep is gone: %v", kids)
		}
		if !isZombie(ocPID) {
			t.Fatalf("OpenCode %d was reaped before the test's end", ocPID)
		}
	})
}

// OPENCODE_PID proves the orphan of an OpenCode that is killed and not
// yet reaped, with no daemon anywhere: a zombie runs nothing, so "started
// by OpenCode pid N (its OPENCODE_PID), which still runs" would spare an
// orphan forever under a parent that waits late. Only 1.x names itself
// in its children's environment and keeps them in its process group;
// 2.x does neither (facts §7), and its orphans are proven by the
// daemon's record alone (TestDoctorReapsAKilledOpenCodesOrphanAndSparesASetsidTwin
// runs that on both generations, its OpenCode a zombie too).
func TestDoctorReapsByOpenCodePIDTheOrphanOfAnUnreapedOpenCode(t *testing.T) {
	g := generations[0]
	home := g.newHome(t)
	p := g.newProject(t, nil)
	rewriteProject(t, p, map[string]any{"lingers": map[string]any{"type": "local", "command": []string{mcpServerBin, "-transport", "stdio", "-name", "lingers", "-log", p.ServerLog("lingers"), "-linger", "10m"}}})
	oc, ocPID := g.startUnreaped(t, home, home)
	oc.WaitStatus(t, p.Dir, "lingers", "connected", 60*time.Second)
	starts := p.Starts(t, "lingers")
	if len(starts) != 1 {
		t.Fatalf("server starts %v, want one", starts)
	}
	orphan := starts[0]
	t.Cleanup(func() { killIfMentions(orphan, p.LogDir) })
	if err := syscall.Kill(ocPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the server adopted", func() bool {
		ppid, _ := parentOf(orphan)
		return ppid != 0 && ppid != ocPID
	})
	if !isZombie(ocPID) {
		t.Fatalf("OpenCode %d is not a zombie", ocPID)
	}
	_, listing := runDoctor(t, home, oc.URL, "--directory", p.Dir)
	if !regexp.MustCompile(`(?m)^warn\s+orphan pid ` + strconv.Itoa(orphan) + `\s.*OPENCODE_PID and its process group\), which is gone`).MatchString(listing) {
		t.Fatalf("doctor does not prove the orphan %d by the OPENCODE_PID of the zombie OpenCode %d", orphan, ocPID)
	}
	code, reaped := runDoctor(t, home, oc.URL, "--reap", "--yes")
	if code != 0 || !regexp.MustCompile(`(?m)^ended pid `+strconv.Itoa(orphan)+` .* with SIGTERM after `).MatchString(reaped) {
		t.Fatalf("doctor --reap --yes: exit %d, did not end %d", code, orphan)
	}
	waitFor(t, 5*time.Second, "the orphan gone", func() bool { return !alive(orphan) })
	if !isZombie(ocPID) {
		t.Fatalf("OpenCode %d was reaped before the test's end", ocPID)
	}
}
