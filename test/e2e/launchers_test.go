package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/ochost"
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

// A server configured through npx, killed on an old release that never
// reports it, has a new, working process within 5 s, as a server run
// directly by node does: the view knows npm's retitled process as the
// server's launcher and sees it exit the moment it does. On 1.18.34,
// which reports the crash itself, the same.
func TestNpxServerCrashRecovered(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	needNpx(t)
	for _, v := range append(slicesClone(oldReleases), ochost.Version) {
		t.Run(v, func(t *testing.T) {
			bin := opencodeBin
			if v != ochost.Version {
				bin = installOpenCode(t, v)
			} else {
				needOpenCode(t)
			}
			oc, err := ochost.Start(ochost.Options{Binary: bin})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(oc.Kill)
			o := &OpenCode{OpenCode: oc}
			p := newProject(t, nil)
			rewriteProject(t, p, map[string]any{"s": p.NpxServer(t, "s")})
			w := startWatch(t, o, oc.Password, "--directory", p.Dir)
			w.WaitLog(t, "watching opencode", 15*time.Second)
			p.WaitStarts(t, "s", 1, 60*time.Second)
			waitFor(t, 20*time.Second, "the view serving s through npx", func() bool {
				st := w.StatusJSON(t)
				return strings.Contains(mustJSON(t, st), `"launcher":"npx"`)
			})
			killed := time.Now()
			killPID(t, p.Starts(t, "s")[0])
			p.WaitStarts(t, "s", 2, 5*time.Second)
			took := time.Since(killed)
			waitFor(t, 5*time.Second, "the new server initialized", func() bool {
				n := 0
				for _, ev := range p.ServerEvents(t, "s") {
					if ev.Event == "initialize" {
						n++
					}
				}
				return n >= 2
			})
			t.Logf("OpenCode %s: a new, working npx server %v after the kill", v, took.Round(10*time.Millisecond))
			// The server logs its initialize before OpenCode has its
			// answer; 1.18.34 may say failed meanwhile (the old npx ended
			// during the connect), until the handshake or the daemon's
			// read after its connect puts it right.
			waitFor(t, 10*time.Second, "OpenCode to say connected after the repair", func() bool {
				return o.Status(t, p.Dir)["s"].Status == "connected"
			})
		})
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
