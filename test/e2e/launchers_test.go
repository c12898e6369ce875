package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/shellquote"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// needNpx finds npx; it skips only when npx is missing and CI is not set.
func needNpx(t testing.TB) string {
	t.Helper()
	npx, err := exec.LookPath("npx")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("npx missing under CI: %v", err)
		}
		t.Skipf("npx missing: %v", err)
	}
	return npx
}

// NpxServer is the config of a local test server configured the way most
// people configure one, `npx -y PACKAGE ARGS`: the package is a local
// one (no network), whose bin is a node script that runs test/mcpserver
// as its child. On the process table that is npm, retitled "npm exec
// …", then `sh -c`, then node, then the server: four processes, the
// first OpenCode's child.
func (p *Project) NpxServer(t testing.TB, name string) map[string]any {
	t.Helper()
	npx := needNpx(t)
	pkg := filepath.Join(filepath.Dir(p.Dir), "pkg-"+strings.NewReplacer("/", "_", " ", "_").Replace(name))
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest, _ := json.Marshal(map[string]any{"name": "e2e-mcp-" + strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(name)), "version": "1.0.0", "bin": map[string]string{"e2e-mcp": "index.js"}})
	script := `#!/usr/bin/env node
const { spawn } = require("child_process");
const child = spawn(` + jsString(mcpServerBin) + `, process.argv.slice(2), { stdio: "inherit" });
child.on("exit", (code, signal) => process.exit(code === null ? 1 : code));
for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(s, () => child.kill(s));
`
	for f, b := range map[string][]byte{"package.json": manifest, "index.js": []byte(script)} {
		if err := os.WriteFile(filepath.Join(pkg, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cache := filepath.Join(filepath.Dir(p.Dir), "npm-cache")
	return map[string]any{"type": "local",
		"command": []string{npx, "-y", pkg, "-transport", "stdio", "-name", name, "-log", p.ServerLog(name)},
		"environment": map[string]string{"npm_config_cache": cache, "npm_config_offline": "true",
			"npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ShServer is the config of a local test server run the way a user
// wraps one in a shell, `sh -c "cd DIR && SERVER ARGS"`: dash, the
// shell here, forks the server as its child and exits when it does
// (bash would exec it).
func (p *Project) ShServer(t testing.TB, name string) map[string]any {
	script := "cd " + shellquote.Quote(p.Dir) + " && " + shellquote.Join(p.StdioServer(name)["command"].([]string))
	return map[string]any{"type": "local", "command": []string{"sh", "-c", script}}
}

// ShLiteralServer is the config of a local test server run by a shell
// script procview reads, `sh -c "exec SERVER ARGS"` (plain words): the
// shell is known to exit with its server.
func (p *Project) ShLiteralServer(t testing.TB, name string) map[string]any {
	t.Helper()
	script := "exec " + shellquote.Join(p.StdioServer(name)["command"].([]string))
	if strings.ContainsAny(script, `'"\`) {
		t.Fatalf("the script %q is not literal", script)
	}
	return map[string]any{"type": "local", "command": []string{"sh", "-c", script}}
}

// ScriptServer is the config of a local test server run by a wrapper
// script of the user's (a file beside the project, `#!/bin/sh`, which
// sets the environment and execs the server under its own pid).
func (p *Project) ScriptServer(t testing.TB, name string) map[string]any {
	t.Helper()
	script := filepath.Join(filepath.Dir(p.Dir), "run-"+strings.NewReplacer("/", "_", " ", "_").Replace(name)+".sh")
	body := "#!/bin/sh\nexport MCP_WRAPPED=1\nexec " + shellquote.Quote(mcpServerBin) + ` "$@"` + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	args := p.StdioServer(name)["command"].([]string)[1:]
	return map[string]any{"type": "local", "command": append([]string{script}, args...)}
}

// launcher is one way a user's config runs a local server: through npx,
// a shell, a wrapper script, or as itself.
type launcher struct {
	Name string
	// Word is what the daemon's status says runs the server
	// ("launcher"), "" when OpenCode's child is the server itself.
	Word string
	// RunsOn: status says the launcher may outlive its server (a shell
	// whose script is not one literal command).
	RunsOn bool
	// Server is the config of the test server called name in p.
	Server func(p *Project, t testing.TB, name string) map[string]any
}

var launchers = []launcher{
	{Name: "direct", Server: func(p *Project, _ testing.TB, name string) map[string]any { return p.StdioServer(name) }},
	{Name: "npx", Word: "npx", Server: (*Project).NpxServer},
	{Name: "sh -c", Word: "sh -c", RunsOn: true, Server: (*Project).ShServer}, // the cd's quoted "my projéct"
	{Name: "sh -c literal", Word: "sh -c", Server: (*Project).ShLiteralServer},
	{Name: "script", Server: (*Project).ScriptServer},
}

// A stdio server whatever runs it (npx, a shell, a wrapper script, or
// nothing) has a new, working process within 10 s of a crash, and so
// has the process the daemon's own repair started when it crashes in
// turn: a second crash is repaired like the first.
func TestStdioCrashThroughLauncherRecovered(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		for _, l := range launchers {
			t.Run(l.Name, func(t *testing.T) { crashTwice(t, g, l) })
		}
	})
}

// On releases that never report a dead stdio server (oldReleases) the
// daemon's process view is the only crash report: it knows npm's
// retitled process as the server's launcher and sees it exit the moment
// it does, for the first crash and for a crash of the process the
// daemon's repair started.
func TestOldReleaseNpxServerCrashRecovered(t *testing.T) {
	for _, v := range oldReleases {
		t.Run(v, func(t *testing.T) {
			if buildErr != nil {
				t.Fatal(buildErr)
			}
			crashTwice(t, gen{Name: v, Gen: ochost.Gen1, Bin: installOpenCode(t, v)}, launchers[1])
		})
	}
}

// crashTwice runs the test server s through launcher l under a watching
// daemon on OpenCode release g, kills it, waits for its repair, and kills
// the process that repair started. After each kill a new process answers
// OpenCode's initialize within 10 s and OpenCode says connected.
func crashTwice(t *testing.T, g gen, l launcher) {
	oc := g.startOpenCode(t, 0, "")
	p := g.newProject(t, nil)
	rewriteProject(t, p, map[string]any{"s": l.Server(p, t, "s")})
	w := startWatch(t, oc, oc.Password, "--directory", p.Dir)
	w.WaitLog(t, "watching opencode", 15*time.Second)
	p.WaitStarts(t, "s", 1, 60*time.Second)
	if l.Word != "" {
		var status string
		waitFor(t, 20*time.Second, "the view serving s through "+l.Word, func() bool {
			status = mustJSON(t, w.StatusJSON(t))
			return strings.Contains(status, `"launcher":"`+l.Word+`"`)
		})
		if runsOn := strings.Contains(status, `"launcher_runs_on":true`); runsOn != l.RunsOn {
			t.Fatalf("status says launcher_runs_on %v, want %v: %s", runsOn, l.RunsOn, status)
		}
	}
	// The server killed is the one OpenCode has connected: on a loaded
	// machine OpenCode's first start may fail (a slow launcher) and the
	// daemon's repair start another before the first kill.
	oc.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)
	for n := 1; n <= 2; n++ {
		starts, inits := p.Starts(t, "s"), p.Count(t, "s", "initialize")
		killed := time.Now()
		killPID(t, starts[len(starts)-1])
		p.WaitStarts(t, "s", len(starts)+1, 10*time.Second)
		took := time.Since(killed)
		waitFor(t, 10*time.Second, "the new server initialized", func() bool {
			return p.Count(t, "s", "initialize") > inits
		})
		t.Logf("OpenCode %s, %s: crash %d: a new, working server %v after the kill", g.Name, l.Name, n, took.Round(10*time.Millisecond))
		// The server logs its initialize before OpenCode has its answer;
		// OpenCode may say failed meanwhile (an old npx ended during the
		// connect), until the handshake or the daemon's read after its
		// connect puts it right.
		oc.WaitStatus(t, p.Dir, "s", "connected", 10*time.Second)
	}
}
