package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/mcp-reconnect/mcp-reconnect/internal/loopback"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// doctor --reap with no terminal on standard input and no --yes refuses,
// naming --yes, before it lists or ends anything; --yes without --reap
// and --reap with --json are refused too. The environment cannot say yes.
// (No test here ends a process: this machine's orphans are not the
// test's.)
func TestDoctorReapRefusals(t *testing.T) {
	t.Setenv("MCP_RECONNECT_YES", "true")
	t.Setenv("MCP_RECONNECT_STATUS_ADDR", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--config", "", "--reap"}, "pass --yes"},
		{[]string{"doctor", "--config", "", "--yes"}, "--yes is for --reap"},
		{[]string{"doctor", "--config", "", "--reap", "--yes", "--json"}, "--json is not for --reap"},
	} {
		var out, errb bytes.Buffer
		root := newRoot(&out, &errb)
		root.SetIn(strings.NewReader("y\ny\n")) // not a terminal
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() != 0 {
			t.Errorf("%v: err %v, output %q; want an error saying %q", tc.args, err, out.String(), tc.want)
		}
	}
}

// With neither a URL nor a password, doctor checks the OpenCode 2
// service watch would follow: here the only one, of another channel
// (service-<hash>.json, no service.json), and says which file; with a
// service.json beside it that answers too, that one, naming the other.
func TestDoctorChecksTheServiceWatchFollows(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("MCP_RECONNECT_STATUS_ADDR", "")
	dir := filepath.Join(state, "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	serve := func(pid int) string {
		fake := fake2.New(nil)
		fake.SetPID(pid)
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	register := func(name, url string, pid int) string {
		p := filepath.Join(dir, name)
		b := fmt.Sprintf(`{"id":"x","version":%q,"url":%q,"pid":%d,"password":%q}`, fake2.DefaultVersion, url, pid, fake2.DefaultPassword)
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	check := func() map[string]string {
		t.Helper()
		_, out, errOut := runCLI(t, "doctor", "--config", "", "--json")
		var checks []struct{ Severity, Name, Detail string }
		if err := json.Unmarshal([]byte(out), &checks); err != nil {
			t.Fatalf("doctor --json: %v\n%s%s", err, out, errOut)
		}
		got := map[string]string{}
		for _, c := range checks {
			if _, ok := got[c.Name]; !ok {
				got[c.Name] = c.Severity + " " + c.Detail
			}
		}
		return got
	}

	betaURL := serve(5005)
	beta := register("service-a1047eab1035d58682a53557e0b2a75edbfd15fd.json", betaURL, 5005)
	got := check()
	if !strings.HasPrefix(got["service"], "ok "+beta+" (pid 5005") || got["reachable"] != "ok "+betaURL || !strings.Contains(got["password"], "service file "+beta) {
		t.Fatalf("only %s: service %q, reachable %q, password %q", beta, got["service"], got["reachable"], got["password"])
	}

	latestURL := serve(6006)
	latest := register("service.json", latestURL, 6006)
	got = check()
	if !strings.HasPrefix(got["service"], "ok "+latest+" (pid 6006") || !strings.Contains(got["service"], "also running, not checked here: "+beta) || got["reachable"] != "ok "+latestURL {
		t.Fatalf("with service.json too: service %q, reachable %q", got["service"], got["reachable"])
	}
}

// doctorCheck is one line of doctor --json.
type doctorCheck struct{ Severity, Name, Detail string }

// runDoctor runs doctor --json with args and returns its checks.
func runDoctor(t *testing.T, args ...string) []doctorCheck {
	t.Helper()
	_, out, errOut := runCLI(t, append([]string{"doctor", "--json"}, args...)...)
	var checks []doctorCheck
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("doctor --json %v: %v\n%s%s", args, err, out, errOut)
	}
	return checks
}

// named are the details of the checks called name, in order, each
// prefixed by its severity.
func named(checks []doctorCheck, name string) []string {
	var out []string
	for _, c := range checks {
		if c.Name == name {
			out = append(out, c.Severity+" "+c.Detail)
		}
	}
	return out
}

// registeredDaemon registers a running process (a sleep, standing for a daemon)
// in the registry as a daemon watching urls (and following service, when
// set), its status API where nothing listens; it returns the pid.
func registeredDaemon(t *testing.T, service string, urls ...string) int {
	t.Helper()
	p := exec.Command("sleep", "60")
	if err := p.Start(); err != nil {
		t.Fatalf("no sleep to stand for a daemon: %v", err)
	}
	t.Cleanup(func() { _ = p.Process.Kill(); _ = p.Wait() })
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	remove, err := reg.Register(registry.Entry{PID: p.Process.Pid, URLs: urls, Service: service, StatusAddr: "127.0.0.1:1", Started: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return p.Process.Pid
}

// goneProcess is the pid of a process that has exited.
func goneProcess(t *testing.T) int {
	t.Helper()
	p := exec.Command("true")
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	return p.Process.Pid
}

// fake1 serves a 1.x OpenCode that accepts only password pw.
func fake1(t *testing.T, pw string) string {
	t.Helper()
	f := fakeopencode.New(nil)
	f.Password = pw
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

// doctorState gives the test an empty registry, no OpenCode 2 service
// and no config file, and none of the variables that choose a server.
func doctorState(t *testing.T) string {
	t.Helper()
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	for _, k := range []string{"OPENCODE_URL", "OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME", "MCP_RECONNECT_STATUS_ADDR", "MCP_RECONNECT_SERVICE_FILE", "MCP_RECONNECT_CONFIG", "MCP_RECONNECT_PASSWORD_FILE"} {
		t.Setenv(k, "")
	}
	return state
}

// With no --url, doctor checks the OpenCode of each running daemon, with
// the password that daemon has for it (its [[opencode]] table's
// password-file, else the one doctor is given, here the ambient
// $OPENCODE_SERVER_PASSWORD), each server once; its first line says
// which and why. A URL the user gives (--url, $OPENCODE_URL) comes
// first. The entries of a daemon that is gone, or of another user, are
// not daemons.
func TestDoctorChecksTheOpenCodeOfEachRunningDaemon(t *testing.T) {
	doctorState(t)
	t.Setenv("OPENCODE_SERVER_PASSWORD", "c-secret")
	tableURL, envURL := fake1(t, "table-secret"), fake1(t, "c-secret")
	cfg := writeConfig(t, "[[opencode]]\nurl = \""+tableURL+"\"\npassword-file = \""+passwordFile(t, "table-secret")+"\"\n")

	// Nothing running: the default address, saying why.
	checks := runDoctor(t, "--config", cfg)
	if got := named(checks, "target"); len(got) != 1 || !strings.HasPrefix(got[0], "info http://127.0.0.1:4096: OpenCode 1.x's default address (no --url or $OPENCODE_URL given, no mcp-reconnect daemon running") {
		t.Fatalf("with nothing running: target %q", got)
	}

	// A daemon that is gone, and one of another user: still nothing.
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Register(registry.Entry{PID: goneProcess(t), URLs: []string{tableURL}, StatusAddr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	foreign := registeredDaemon(t, "", envURL)
	if os.Getuid() == 0 {
		giveAway(t, filepath.Join(reg.Dir, strconv.Itoa(foreign)+".json"))
		if got := named(runDoctor(t, "--config", cfg), "target"); len(got) != 1 || !strings.Contains(got[0], "default address") {
			t.Fatalf("with entries of a gone daemon and of another user: target %q", got)
		}
	}
	_ = os.Remove(filepath.Join(reg.Dir, strconv.Itoa(foreign)+".json"))

	first := registeredDaemon(t, "", tableURL)
	second := registeredDaemon(t, "", envURL, tableURL)
	checks = runDoctor(t, "--config", cfg)
	want := []string{
		fmt.Sprintf("info %s: watched by the running mcp-reconnect daemon pid %d (no --url or $OPENCODE_URL given)", tableURL, first),
		fmt.Sprintf("info %s: watched by the running mcp-reconnect daemon pid %d (no --url or $OPENCODE_URL given)", envURL, second),
	}
	if got := named(checks, "target"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("targets:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := named(checks, "authenticated"); len(got) != 2 || got[0] != "ok credentials accepted" || got[1] != "ok credentials accepted" {
		t.Errorf("authenticated %q: each daemon's server with the password it has", got)
	}
	if got := named(checks, "password"); len(got) != 2 || !strings.Contains(got[0], "password file ") || !strings.Contains(got[1], "env OPENCODE_SERVER_PASSWORD") {
		t.Errorf("password sources %q", got)
	}
	if got := named(checks, "processes"); len(got) != 1 {
		t.Errorf("the processes are checked %d times, want once: %q", len(got), got)
	}
	for _, c := range checks {
		if strings.Contains(c.Detail, "secret") {
			t.Errorf("a password in the report: %+v", c)
		}
	}

	// The password given to doctor names no server: a daemon's server on
	// another host, which the daemon reaches with a password of its own,
	// is not sent it.
	remote := "https://opencode.invalid:4096"
	far := registeredDaemon(t, "", remote)
	checks = runDoctor(t, "--config", cfg)
	for _, c := range checks {
		if c.Name == "target" && strings.HasPrefix(c.Detail, remote) {
			if !strings.Contains(c.Detail, fmt.Sprintf("pid %d", far)) || !strings.Contains(c.Detail, "not sent to another host") {
				t.Errorf("the remote target: %q", c.Detail)
			}
		}
	}
	if got := named(checks, "password"); len(got) != 3 || !strings.Contains(got[2], "none given") {
		t.Errorf("password sources with a remote daemon server: %q", got)
	}

	// What the user names wins over the daemons.
	other := fake1(t, "c-secret")
	if got := named(runDoctor(t, "--config", cfg, "--url", other), "target"); len(got) != 1 || got[0] != "info "+other+": given by --url" {
		t.Errorf("--url: target %q", got)
	}
	t.Setenv("OPENCODE_URL", other)
	if got := named(runDoctor(t, "--config", cfg), "target"); len(got) != 1 || got[0] != "info "+other+": given by $OPENCODE_URL" {
		t.Errorf("$OPENCODE_URL: target %q", got)
	}
}

// writeService registers an OpenCode 2 service in state's service.json.
func writeService(t *testing.T, state, url string, pid int) string {
	t.Helper()
	dir := filepath.Join(state, "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "service.json")
	b := fmt.Sprintf(`{"id":"x","version":%q,"url":%q,"pid":%d,"password":%q}`, fake2.DefaultVersion, url, pid, fake2.DefaultPassword)
	if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// With no --url and no daemon, doctor checks the OpenCode 2 service; a
// service file whose pid is gone is stale (no service runs), and doctor
// checks the 1.x default then, as watch would watch it, saying so. A
// daemon that follows the service is checked with the service file's
// password, at the URL the daemon watches, while the service's pid runs.
func TestDoctorChecksTheServiceThenTheDefault(t *testing.T) {
	state := doctorState(t)
	fake := fake2.New(nil)
	fake.SetPID(os.Getpid())
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)

	file := writeService(t, state, srv.URL, os.Getpid())
	checks := runDoctor(t, "--config", "")
	if got := named(checks, "target"); len(got) != 1 || got[0] != "info "+srv.URL+": the OpenCode 2 background service (no --url or $OPENCODE_URL given, no mcp-reconnect daemon running)" {
		t.Fatalf("a service: target %q", got)
	}
	if got := named(checks, "authenticated"); len(got) != 1 || !strings.HasPrefix(got[0], "ok ") {
		t.Fatalf("a service: authenticated %q", got)
	}

	pid := registeredDaemon(t, file, srv.URL)
	checks = runDoctor(t, "--config", "")
	if got := named(checks, "target"); len(got) != 1 || got[0] != fmt.Sprintf("info %s: the OpenCode 2 service the running mcp-reconnect daemon pid %d follows (no --url or $OPENCODE_URL given)", srv.URL, pid) {
		t.Fatalf("a daemon following the service: target %q", got)
	}
	if got := named(checks, "password"); len(got) != 1 || got[0] != "ok from service file "+file {
		t.Fatalf("a daemon following the service: password %q", got)
	}
	reg, _ := registry.Default()
	_ = os.Remove(filepath.Join(reg.Dir, strconv.Itoa(pid)+".json"))

	gone := goneProcess(t)
	var sent atomic.Bool // the stale file's password reached the port
	holder := fakeopencode.New(nil)
	staleSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pw, _ := r.BasicAuth(); pw == fake2.DefaultPassword {
			sent.Store(true)
		}
		holder.ServeHTTP(w, r)
	})) // another OpenCode holds its port now
	t.Cleanup(staleSrv.Close)
	writeService(t, state, staleSrv.URL, gone)

	// A daemon that followed that service and still lists its URL: not
	// checked with the stale file's password.
	pid = registeredDaemon(t, file, staleSrv.URL)
	checks = runDoctor(t, "--config", "")
	if got := named(checks, "password"); len(got) != 1 || !strings.Contains(got[0], "none given") || sent.Load() {
		t.Fatalf("a daemon that followed a service now gone: password %q, the stale password sent: %v", got, sent.Load())
	}
	_ = os.Remove(filepath.Join(reg.Dir, strconv.Itoa(pid)+".json"))

	checks = runDoctor(t, "--config", "")
	if got := named(checks, "target"); len(got) != 1 || !strings.HasPrefix(got[0], "info http://127.0.0.1:4096: OpenCode 1.x's default address") || !strings.HasSuffix(got[0], "no OpenCode 2 service running)") {
		t.Fatalf("a stale service file: target %q", got)
	}
	if got := named(checks, "service"); len(got) != 1 || got[0] != fmt.Sprintf("warn no OpenCode 2 service runs: %s registers pid %d, which is gone", file, gone) {
		t.Fatalf("a stale service file: service %q", got)
	}
}

// A daemon's server whose [[opencode]] table names a password file of
// another user is not checked with it: doctor refuses the file, as watch
// does, and sends nothing.
func TestDoctorRefusesAnotherUsersPasswordFileForADaemonsServer(t *testing.T) {
	doctorState(t)
	pw := passwordFile(t, "their-secret")
	giveAway(t, pw)
	url := fake1(t, "their-secret")
	registeredDaemon(t, "", url)
	code, out, errOut := runCLI(t, "doctor", "--config", writeConfig(t, "[[opencode]]\nurl = \""+url+"\"\npassword-file = \""+pw+"\"\n"))
	if code == 0 || out != "" || !strings.Contains(errOut, pw) || !strings.Contains(errOut, "another user") || strings.Contains(errOut, "their-secret") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// A service file's password never goes to a port another user of the
// machine holds, as the daemon's follower refuses it (the file is stale:
// its service is gone, its pid runs again -- here this process -- and
// the next service reuses that password): not for a daemon that follows
// that file (no --url), not for the service doctor would choose itself,
// not for the one --service-file names. doctor says why it is not
// checked.
func TestDoctorNeverSendsAServicePasswordToAnotherUsersListener(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("a listener of another user needs root: CI runs as root")
		}
		t.Skip("a listener of another user needs root")
	}
	perl, err := exec.LookPath("perl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("another user's listener needs perl")
		}
		t.Skip("another user's listener needs perl")
	}
	state := doctorState(t)
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	spool, err := os.MkdirTemp("", "mcpr-leak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(spool) })
	if err := os.Chmod(spool, 0o777); err != nil {
		t.Fatal(err)
	}
	heard := filepath.Join(spool, "heard")
	// Another user's listener: it keeps whatever it is sent.
	l := exec.Command(perl, "-MIO::Socket::INET", "-e",
		`$s=IO::Socket::INET->new(LocalAddr=>"127.0.0.1",LocalPort=>$ARGV[0],Listen=>5,ReuseAddr=>1) or die "$!"; open(F,">",$ARGV[1]) or die; select F; $|=1; while($c=$s->accept){ $c->recv($b,4096); print F $b; close $c }`,
		fmt.Sprint(port), heard)
	l.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Process.Kill(); _ = l.Wait() })
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatal("another user's listener did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	file := writeService(t, state, u, os.Getpid())
	leaked := func(how string) {
		t.Helper()
		b, _ := os.ReadFile(heard)
		if basic := base64.StdEncoding.EncodeToString([]byte("opencode:" + fake2.DefaultPassword)); strings.Contains(string(b), basic) || strings.Contains(string(b), fake2.DefaultPassword) {
			t.Fatalf("%s: doctor sent the service file's password to another user's listener at %s; it heard:\n%s", how, u, b)
		}
	}
	why := file + ": what listens at 127.0.0.1:" + fmt.Sprint(port) + " is another user's process; the service's password is not sent there"

	pid := registeredDaemon(t, file, u)
	checks := runDoctor(t, "--config", "")
	leaked("a daemon following the file")
	if got := named(checks, "service"); len(got) != 1 || got[0] != "warn "+why+": not checked" {
		t.Errorf("a daemon following the file: service %q", got)
	}
	if got := named(checks, "processes"); len(got) != 1 {
		t.Errorf("the processes are checked %d times, want once: %q", len(got), got)
	}
	reg, _ := registry.Default()
	_ = os.Remove(filepath.Join(reg.Dir, strconv.Itoa(pid)+".json"))

	checks = runDoctor(t, "--config", "")
	leaked("no daemon")
	if got := named(checks, "service"); len(got) != 1 || !strings.Contains(got[0], why) {
		t.Errorf("no daemon: service %q", got)
	}

	_, _, errOut := runCLI(t, "doctor", "--config", "", "--service-file", file)
	leaked("--service-file")
	if !strings.Contains(errOut, why) {
		t.Errorf("--service-file: %s", errOut)
	}
}

// A --service-file that does not exist is refused, naming the file and
// the way out, before anything is checked.
func TestDoctorRefusesAServiceFileThatDoesNotExist(t *testing.T) {
	file := filepath.Join(t.TempDir(), "service.json")
	code, _, errOut := runCLI(t, "doctor", "--config", "", "--service-file", file)
	if code == 0 || !strings.Contains(errOut, "the OpenCode 2 service file: ") || !strings.Contains(errOut, file) || !strings.Contains(errOut, "(pass --url to check another server)") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
