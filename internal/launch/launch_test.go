package launch

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The credentials follow the generation's rules: 1.x reads
// OPENCODE_SERVER_PASSWORD and OPENCODE_SERVER_USERNAME; 2.x reads
// OPENCODE_PASSWORD, then OPENCODE_SERVER_PASSWORD, and always
// authenticates as "opencode".
func TestPlanCredentialsPerGeneration(t *testing.T) {
	oc := fakeOpenCode(t)
	type c struct {
		env                  []string
		cred                 Credentials
		password, user, vars string
	}
	for i, tc := range []c{
		{nil, Credentials{Password: "given", Username: "bob"}, "given", "bob", "OPENCODE_SERVER_PASSWORD=given OPENCODE_SERVER_USERNAME=bob"},
		{[]string{"OPENCODE_SERVER_USERNAME=alice", "OPENCODE_SERVER_PASSWORD=env"}, Credentials{}, "env", "alice", "OPENCODE_SERVER_USERNAME=alice OPENCODE_SERVER_PASSWORD=env"},
		{[]string{"OPENCODE_PASSWORD=ignored-by-1x"}, Credentials{Password: "p1"}, "p1", "opencode", "OPENCODE_PASSWORD=ignored-by-1x OPENCODE_SERVER_PASSWORD=p1"},
		// 2.x: both variables hold the child's password (2.x reads the
		// first; a 1.x binary taken for 2.x still gets one).
		{nil, Credentials{Password: "given", Username: "bob", Major: 2}, "given", "opencode", "OPENCODE_PASSWORD=given OPENCODE_SERVER_PASSWORD=given"},
		{[]string{"OPENCODE_SERVER_PASSWORD=second", "OPENCODE_PASSWORD=first"}, Credentials{Major: 2}, "first", "opencode", "OPENCODE_PASSWORD=first OPENCODE_SERVER_PASSWORD=first"},
		{[]string{"OPENCODE_SERVER_PASSWORD=fallback"}, Credentials{Major: 2}, "fallback", "opencode", "OPENCODE_PASSWORD=fallback OPENCODE_SERVER_PASSWORD=fallback"},
	} {
		p, err := NewPlan([]string{oc, "serve"}, tc.env, tc.cred)
		if err != nil {
			t.Fatal(err)
		}
		if p.Password != tc.password || p.Username != tc.user || strings.Join(p.Env, " ") != tc.vars {
			t.Errorf("%d: plan password %q user %q env %q; want %q %q %q", i, p.Password, p.Username, strings.Join(p.Env, " "), tc.password, tc.user, tc.vars)
		}
	}
	p, err := NewPlan([]string{oc, "serve"}, nil, Credentials{Major: 2})
	if err != nil || !p.GeneratedPassword || lookupEnv(p.Env, PasswordEnv2) != p.Password || lookupEnv(p.Env, PasswordEnv) != p.Password {
		t.Fatalf("2.x plan without a password: %+v, %v", p, err)
	}
}

func TestPlanPicksPortAndPassword(t *testing.T) {
	p, err := NewPlan([]string{"true", "serve"}, []string{"A=1"}, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	// "true" is not OpenCode: nothing added, no URL.
	if len(p.Args) != 2 || p.URL != "" {
		t.Fatalf("plan for a non-OpenCode command = %+v", p)
	}
	if !p.GeneratedPassword || len(p.Password) < 24 {
		t.Fatalf("no strong generated password: %q", p.Password)
	}
	if lookupEnv(p.Env, PasswordEnv) != p.Password || lookupEnv(p.Env, "A") != "1" {
		t.Fatalf("env = %v", p.Env)
	}
	for _, a := range p.Args {
		if strings.Contains(a, p.Password) {
			t.Fatal("the password is on the command line")
		}
	}
}

func fakeOpenCode(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	path := dir + "/opencode"
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPlanForOpenCode(t *testing.T) {
	oc := fakeOpenCode(t)
	p, err := NewPlan([]string{oc, "serve"}, nil, Credentials{Password: "given"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Args) != 4 || p.Args[2] != "--port" || !strings.HasPrefix(p.URL, "http://127.0.0.1:") || p.Password != "given" || p.GeneratedPassword {
		t.Fatalf("plan = %+v", p)
	}
	p, err = NewPlan([]string{oc, "--port", "4100", "--hostname", "0.0.0.0"}, []string{PasswordEnv + "=from-env"}, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Args) != 5 || p.URL != "http://127.0.0.1:4100" || p.Password != "from-env" {
		t.Fatalf("plan with a port = %+v", p)
	}
	p, err = NewPlan([]string{oc, "mcp", "auth", "x"}, nil, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Args) != 4 || p.URL != "" {
		t.Fatalf("a subcommand got a port: %+v", p)
	}
	if _, err := NewPlan([]string{oc, "--port", "nope"}, nil, Credentials{}); err == nil {
		t.Fatal("a bad --port was accepted")
	}
	if _, err := NewPlan(nil, nil, Credentials{}); err == nil {
		t.Fatal("an empty command was accepted")
	}
	if _, err := NewPlan([]string{"/no/such/opencode"}, nil, Credentials{}); err == nil {
		t.Fatal("a missing command was accepted")
	}
}

func TestExitCodes(t *testing.T) {
	for cmd, want := range map[string]int{"exit 3": 3, "exit 0": 0, "kill -TERM $$": 128 + 15} {
		p, err := NewPlan([]string{"sh", "-c", cmd}, nil, Credentials{Password: "x"})
		if err != nil {
			t.Fatal(err)
		}
		c, err := Start(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ExitCode(); got != want {
			t.Errorf("%q: exit code %d, want %d", cmd, got, want)
		}
	}
}

func TestTail(t *testing.T) {
	tl := &Tail{max: 10}
	_, _ = tl.Write([]byte("one\ntwo\nthree\nfour\n"))
	if got := tl.Lines(2); got != "hree\nfour" { // the last 10 bytes
		t.Fatalf("Lines(2) = %q", got)
	}
}

// The user's OPENCODE_CONFIG_CONTENT (JSON or JSONC) reaches the child
// untouched: the daemon has nothing to add to it.
func TestConfigContentPassesUntouched(t *testing.T) {
	content := "{\n  // a comment\n  \"plugin\": [\"x\"], \"mcp\": {\"a\": {\"type\": \"local\", \"command\": [\"y\"]}},\n}"
	p, err := NewPlan([]string{fakeOpenCode(t)}, []string{"OPENCODE_CONFIG_CONTENT=" + content}, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lookupEnv(p.Env, "OPENCODE_CONFIG_CONTENT"); got != content {
		t.Fatalf("OPENCODE_CONFIG_CONTENT = %q", got)
	}
}

func TestPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if PortTaken(os.Getpid(), port) {
		t.Error("our own listener counted as another program's")
	}
	if PortTaken(os.Getppid(), port) {
		t.Error("the listener of a process below pid (our parent) counted as another program's")
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	if !PortTaken(other.Process.Pid, port) {
		t.Error("a port another process listens on is not taken")
	}
	l.Close()
	if PortTaken(other.Process.Pid, port) {
		t.Error("a port nobody listens on is taken")
	}
}

func TestNewPort(t *testing.T) {
	p, err := NewPlan([]string{fakeOpenCode(t), "serve", "--", "x"}, nil, Credentials{Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.PortChosen || p.Port == 0 || p.Args[3] != strconv.Itoa(p.Port) {
		t.Fatalf("plan = %+v", p)
	}
	first := p.Port
	for p.Port == first {
		if err := p.NewPort(); err != nil {
			t.Fatal(err)
		}
	}
	if p.Args[2] != "--port" || p.Args[3] != strconv.Itoa(p.Port) || p.Args[4] != "--" || p.URL != "http://127.0.0.1:"+strconv.Itoa(p.Port) {
		t.Fatalf("after NewPort: %+v", p)
	}
	given, _ := NewPlan([]string{fakeOpenCode(t), "--port", "4100"}, nil, Credentials{Password: "pw"})
	if given.PortChosen || given.NewPort() == nil {
		t.Fatal("a port the user gave may be replaced")
	}
}

func TestParseMajor(t *testing.T) {
	for out, want := range map[string]int{"1.18.34\n": 1, "2.0.21": 2, "opencode 2.1.0 (abc)\n": 2, "v10.2.3": 10, "0.0.0-202612010000": 0, "1.2.3-v3": 1} {
		if got, err := ParseMajor(out); err != nil || got != want {
			t.Errorf("ParseMajor(%q) = %d, %v; want %d", out, got, err, want)
		}
	}
	for _, bad := range []string{"", "dev", "1.2"} {
		if _, err := ParseMajor(bad); err == nil {
			t.Errorf("ParseMajor(%q) accepted", bad)
		}
	}
}

// Which listeners take a loopback port: 127.0.0.1 itself and the
// unspecified addresses (IPv4 and IPv6) do; another loopback address or
// ::1 does not.
func TestPortTakenByAddress(t *testing.T) {
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	for addr, want := range map[string]bool{"127.0.0.1": true, "0.0.0.0": true, "[::]": true, "127.0.0.2": false, "[::1]": false} {
		l, err := net.Listen("tcp", addr+":0")
		if err != nil {
			t.Logf("%s: %v (skipped)", addr, err)
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		if got := PortTaken(other.Process.Pid, port); got != want {
			t.Errorf("a listener on %s:%d: taken = %v, want %v", addr, port, got, want)
		}
		l.Close()
	}
}

// Start relays SIGINT and SIGQUIT only when stdin is not a
// terminal, and decides that with isTerminal, which tests for a character
// device. /dev/null is a character device: a wrapper started by a service
// manager, cron, nohup or `docker run` (stdin /dev/null) thinks it is at a
// terminal, catches SIGINT and relays nothing. `kill -INT <wrapper>` (or a
// supervisor that stops with SIGINT and signals only its main pid) is
// swallowed: OpenCode keeps running and the wrapper never exits.
func TestDevNullIsNotATerminal(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Errorf("isTerminal(%s) = true: a wrapper whose stdin is /dev/null will not relay SIGINT/SIGQUIT", os.DevNull)
	}
}

func TestSIGINTRelayedWhenStdinIsDevNull(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	saved := os.Stdin
	os.Stdin = devnull
	defer func() { os.Stdin = saved }()

	p, err := NewPlan([]string{"sh", "-c", `trap 'kill $! 2>/dev/null; exit 7' INT; sleep 5 & wait`}, nil, Credentials{Password: "x"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let sh set its trap
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
		if code := c.ExitCode(); code != 7 {
			t.Errorf("child exit code %d, want 7 (its SIGINT trap)", code)
		}
	case <-time.After(3 * time.Second):
		c.Signal(syscall.SIGKILL)
		<-c.Done()
		t.Errorf("SIGINT sent to the wrapper (stdin %s) never reached the child", os.DevNull)
	}
}
