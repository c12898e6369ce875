package e2e

import (
	"bytes"
	"context"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// Every capability's e2e test runs on both OpenCode generations with the
// same assertions: a test states them once, in a body that
// forEachGeneration runs as two subtests, named after the releases:
//
//	func TestWatchRecoversX(t *testing.T) {
//		forEachGeneration(t, func(t *testing.T, g gen) {
//			oc := g.startOpenCode(t, 0, "")          // 1.18.34 or 2.1.2, hermetic
//			p := g.newProject(t, nil)                // opencode.json or opencode.jsonc
//			rewriteProject(t, p, map[string]any{
//				"s":   p.StdioServer("s"),
//				"off": p.Disabled(p.StdioServer("off")),
//				"r":   RemoteServer(url),
//			})
//			w := startWatch(t, oc, oc.Password)
//			oc.Status(t, p.Dir)                       // a client reads: MCP starts
//			oc.Dispose(t, p.Dir)                      // a client disposes the directory
//			w.WaitLog(t, "reason="+g.CrashEvent, 10*time.Second)
//		})
//	}
//
// (`go test -run 'TestWatchRecoversX/2.1.2'` runs one generation.) What
// differs between the generations is said in one place, never in a test:
//
//   - how OpenCode is started, made ready, read, and disposed of, and the
//     shape and name of a project's config: test/ochost, behind
//     g.startOpenCode, g.newProject, rewriteProject, p.Disabled,
//     OpenCode.Status, WaitStatus, Dispose and Do (whose directory query
//     is the generation's own);
//   - the words a test asserts that differ (an event's name the daemon
//     logs): the fields of gen, filled in below.
//
// A test that needs a word of its own adds a field here rather than an
// if on g in its body: a branch that asserts less on one generation is a
// skip in disguise. What only one generation has (2.x's background
// service and its service.json) is started with g.start and
// ochost.Options.

// gen is one OpenCode release the e2e tests run on, and the words in
// which it differs from the other.
type gen struct {
	// Name is the release, and the subtest's name.
	Name string
	// Gen is its API generation.
	Gen ochost.Generation
	// Bin is its binary (filled by TestMain: $OPENCODE_BIN and
	// $OPENCODE2_BIN, else what scripts/install-opencode.sh installs).
	Bin string
	// CrashEvent is the event by which OpenCode reports that an MCP
	// server it had connected is gone (a stdio child died), and so the
	// reason the daemon logs when that arms or wakes a directory: 1.x
	// publishes mcp.tools.changed; 2.x has no such event on its stream and
	// publishes mcp.status.changed on every status transition instead.
	CrashEvent string
	// Connect is the route a client connects an MCP server on (%s: its
	// name, path-escaped; the directory goes in the query, see
	// OpenCode.Do), and ConnectOK the code it answers when the attempt
	// has ended: 1.x POST /mcp/NAME/connect answers 200 true, 2.x POST
	// /api/experimental/mcp/NAME/connect 204.
	Connect   string
	ConnectOK int
	// PasswordFix is what the daemon's error for a refused password says
	// that the other generation's does not: 1.x names --username (its
	// user is configurable), 2.x its password variables, OPENCODE_PASSWORD
	// first, and its service.json.
	PasswordFix string
	// PasswordVar is the variable `run` hands the server's password to
	// a server of this generation in (2.x reads OPENCODE_PASSWORD first).
	PasswordVar string
	// InfoRoute is the route that says which OpenCode answers, and
	// refuses a request without the password: 1.x GET /global/health,
	// 2.x GET /api/info.
	InfoRoute string
	// TermExit is how a foreground `opencode serve` ends on SIGTERM, as
	// an exit code (128+N: killed by signal N): 1.x has no handler and
	// dies of it (143); 2.1.2 stops its MCP servers and exits 130
	// (measured).
	TermExit int
	// UsesServer is a command line that makes OpenCode serve the
	// directory it runs in and its MCP servers: 1.x `serve` (the wrapper
	// supervises it, and watches it while it runs); 2.x `mcp list`, which
	// attaches to the background service (starting it when none runs),
	// lists the directory's servers and exits, while the service, and
	// the daemon the wrapper leaves watching it, stay.
	UsesServer []string
	// ToolModes are the ways a session's model is offered an MCP
	// server's tools: by name (1.x; 2.x with "codemode": false on the
	// server), and on 2.x also through Code Mode's one execute tool, its
	// default. A test of what a session sees runs once per mode.
	ToolModes []toolMode
}

// toolMode is one way MCP tools reach a session's model: Name is its
// subtest's name, Server the keys a server's config gets for it.
type toolMode struct {
	Name   string
	Server map[string]any
}

// generations are the releases every capability's e2e test runs on: the
// pinned 1.x and 2.x releases.
var generations = []gen{
	{Name: ochost.Version, Gen: ochost.Gen1, CrashEvent: "mcp.tools.changed", Connect: "/mcp/%s/connect", ConnectOK: 200,
		PasswordFix: "--username", PasswordVar: "OPENCODE_SERVER_PASSWORD", InfoRoute: "/global/health", TermExit: 128 + 15,
		UsesServer: []string{"serve"}, ToolModes: []toolMode{{Name: "tools"}}},
	{Name: ochost.Version2, Gen: ochost.Gen2, CrashEvent: "mcp.status.changed", Connect: "/api/experimental/mcp/%s/connect", ConnectOK: 204,
		PasswordFix: "OPENCODE_PASSWORD, else OPENCODE_SERVER_PASSWORD, else its service.json", PasswordVar: "OPENCODE_PASSWORD",
		InfoRoute: "/api/info", TermExit: 130, UsesServer: []string{"mcp", "list"},
		ToolModes: []toolMode{{Name: "tools", Server: map[string]any{"codemode": false}}, {Name: "codemode"}}},
}

// findBinaries fills each generation's binary.
func findBinaries(root string) {
	generations[0].Bin = ochost.Binary(root)
	generations[1].Bin = ochost.Binary2(root)
	opencodeBin = generations[0].Bin
}

// forEachGeneration runs body once per generation, each as a subtest
// (or, given a *testing.B, a sub-benchmark) named after its release
// ("1.18.34", "2.1.2"), in that order. A missing binary skips its
// subtest, and fails it under CI=true.
func forEachGeneration[T interface {
	testing.TB
	Run(name string, f func(T)) bool
}](t T, body func(t T, g gen)) {
	t.Helper()
	for _, g := range generations {
		t.Run(g.Name, func(t T) {
			needBinary(t, g.Bin, g.Name)
			body(t, g)
		})
	}
}

// onlyGeneration runs body as forEachGeneration does, for the one
// generation that has a capability the other lacks (2.x's background
// service, --standalone): its subtest is named after its release, so the
// output says which generation the capability is tested on.
func onlyGeneration(t *testing.T, which ochost.Generation, body func(t *testing.T, g gen)) {
	t.Helper()
	for _, g := range generations {
		if g.Gen == which {
			t.Run(g.Name, func(t *testing.T) {
				needBinary(t, g.Bin, g.Name)
				body(t, g)
			})
		}
	}
}

// startOpenCode starts a hermetic OpenCode server of this release on
// port (0: a free one) in home ("": a new one, see newHome), and ends it
// when the test ends.
func (g gen) startOpenCode(t testing.TB, port int, home string) *OpenCode {
	t.Helper()
	return g.start(t, ochost.Options{Port: port, Home: home})
}

// start starts a hermetic OpenCode of this release with options o (its
// Binary and Generation are g's), and ends it when the test ends. 2.x's
// background service, which every 2.x CLI command starts, is
// generations[1].start(t, ochost.Options{Service: true, Home: home}): its
// service.json is oc.ServiceFile().
func (g gen) start(t testing.TB, o ochost.Options) *OpenCode {
	t.Helper()
	needBinary(t, g.Bin, g.Name)
	o.Binary, o.Generation = g.Bin, g.Gen
	oc, err := ochost.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oc.Kill)
	return &OpenCode{OpenCode: oc, bin: g.Bin}
}

// newHome makes a hermetic home that outlives one OpenCode (a restart on
// the same home), prepared as ochost prepares its own: 1.x's config
// directory seeded against its hidden npm install.
func (g gen) newHome(t testing.TB) string {
	t.Helper()
	home := t.TempDir()
	if g.Gen == ochost.Gen1 {
		if err := ochost.SeedConfigDir(filepath.Join(home, "config", "opencode")); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// newCLIHome makes a hermetic home (newHome) for OpenCode's own command
// line, run by a test as a user runs it, in which the server a command
// uses asks for password and never listens on a shared port. 1.x: each
// command serves itself, and the password is in env, the environment
// the test gives the commands. 2.x: the commands attach to the
// background service, and start it when none runs; it is set as a user
// sets it (`opencode service set port|password`: a free port, never the
// shared 49374, and password), and env is empty. Every process still
// running in the home when the test ends (a service, its MCP servers, a
// daemon a wrapper started) is ended then.
func (g gen) newCLIHome(t testing.TB, password string) (home string, env []string) {
	t.Helper()
	needBinary(t, g.Bin, g.Name)
	home = g.newHome(t)
	t.Cleanup(func() { endProcessesOf(home) })
	if g.Gen == ochost.Gen1 {
		return home, []string{g.PasswordVar + "=" + password}
	}
	for _, set := range [][]string{{"port", strconv.Itoa(freePort(t))}, {"password", password}} {
		cmd := exec.Command(g.Bin, append([]string{"service", "set"}, set...)...)
		cmd.Env, cmd.Dir = ochost.Env(home), home
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("opencode service set %s: %v\n%s", set[0], err, out)
		}
	}
	return home, nil
}

// endProcessesOf kills every process of the hermetic home (its
// environment's HOME), twice over: a service a command was starting when
// the first pass ran is ended by the second.
func endProcessesOf(home string) {
	marker := []byte("\x00HOME=" + home + "\x00")
	for range 2 {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if bytes.Contains(append([]byte{0}, env...), marker) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// newProject makes a project directory (its name has a space and a
// non-ASCII letter) whose config, in this release's file and shape,
// names the MCP servers mcp (name → server config; see rewriteProject).
func (g gen) newProject(t testing.TB, mcp map[string]any) *Project {
	t.Helper()
	root := t.TempDir()
	p := &Project{Dir: filepath.Join(root, "my projéct"), LogDir: filepath.Join(root, "logs"), gen: g.Gen}
	for _, d := range []string{p.Dir, p.LogDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return rewriteProject(t, p, mcp)
}

// Disabled is server's config marked disabled, in the project's
// generation's words (1.x "enabled": false, 2.x "disabled": true).
func (p *Project) Disabled(server map[string]any) map[string]any {
	return p.gen.Disabled(server)
}

// WithStartupTimeout is server's config with the time OpenCode gives it
// to start and list its tools, in the project's generation's words: 1.x
// "timeout": ms, 2.x "timeout": {"startup": ms}.
func (p *Project) WithStartupTimeout(server map[string]any, ms int) map[string]any {
	c := maps.Clone(server)
	if p.gen == ochost.Gen2 {
		c["timeout"] = map[string]any{"startup": ms}
	} else {
		c["timeout"] = ms
	}
	return c
}

// Disconnect disables server name in dir as a user does (1.x POST
// /mcp/NAME/disconnect, 2.x POST /api/experimental/mcp/NAME/disconnect):
// OpenCode stops it and says disabled.
func (o *OpenCode) Disconnect(t testing.TB, dir, name string) {
	t.Helper()
	route, want := "/mcp/"+url.PathEscape(name)+"/disconnect", 200
	if o.Gen == ochost.Gen2 {
		route, want = "/api/experimental"+route, 204
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, body, err := o.Do(ctx, "POST", route, dir); err != nil || code != want {
		t.Fatalf("disconnect %s: %d %v %s", name, code, err, body)
	}
}

// Dispose ends dir's instance (1.x) or location (2.x) as a client does,
// its MCP servers with it.
func (o *OpenCode) Dispose(t testing.TB, dir string) {
	t.Helper()
	if err := o.OpenCode.Dispose(dir); err != nil {
		t.Fatal(err)
	}
}
