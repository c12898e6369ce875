package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// The OpenCode plugin (tools/distpkg/npm/plugin), installed as npm lays
// out the mcp-reconnect package and named in OpenCode's own config the
// way the README says, and nothing else: no alias, no service, no
// watch of the test's own.

// pluginPassword is every plugin test's OpenCode password: the shell's
// metacharacters, quotes and a space, which must reach the daemon intact
// (through its environment) and never its command line or log.
const pluginPassword = `pa$s w"o'r;d $(touch x) ` + "`id`"

// npmPackage lays out, under a new directory whose path has a space, the
// mcp-reconnect package as npm installs it: node_modules/mcp-reconnect
// (tools/distpkg/npm as it ships, its package.json naming this machine's
// platform package) beside node_modules/@mcp-reconnect/OS-CPU holding
// the binary built for this test (withBinary), or without the platform
// package. It returns the mcp-reconnect package's directory.
func npmPackage(t testing.TB, withBinary bool) string {
	t.Helper()
	plat := map[string]string{"linux": "linux", "darwin": "darwin"}[runtime.GOOS] + "-" + map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	modules := filepath.Join(t.TempDir(), "npm prefix", "node_modules")
	pkg := filepath.Join(modules, "mcp-reconnect")
	src := filepath.Join(repoRoot(), "tools", "distpkg", "npm")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		copyTo(t, p, filepath.Join(pkg, rel), 0o755)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]any
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &manifest)
	}
	if err != nil {
		t.Fatal(err)
	}
	manifest["version"] = "0.0.0-e2e"
	manifest["optionalDependencies"] = map[string]string{"@mcp-reconnect/" + plat: "0.0.0-e2e"}
	writeJSONFile(t, filepath.Join(pkg, "package.json"), manifest)
	if withBinary {
		dir := filepath.Join(modules, "@mcp-reconnect", plat)
		copyTo(t, reconnectBin, filepath.Join(dir, "bin", "mcp-reconnect"), 0o755)
		goos, cpu, _ := strings.Cut(plat, "-")
		writeJSONFile(t, filepath.Join(dir, "package.json"), map[string]any{"name": "@mcp-reconnect/" + plat, "version": "0.0.0-e2e", "os": []string{goos}, "cpu": []string{cpu}})
	}
	return pkg
}

func writeJSONFile(t testing.TB, path string, v any) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(mustJSON(t, v)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// usePlugin names the plugin at pkg in the global OpenCode config of
// home, as the README says: 1.x opencode.json "plugin", 2.x
// opencode.jsonc "plugins", the package's directory.
func (g gen) usePlugin(t testing.TB, home, pkg string) {
	t.Helper()
	dir := filepath.Join(home, "config", "opencode")
	if g.Gen == ochost.Gen2 {
		writeJSONFile(t, filepath.Join(dir, "opencode.jsonc"), map[string]any{"plugins": []string{pkg}})
		return
	}
	writeJSONFile(t, filepath.Join(dir, "opencode.json"), map[string]any{"$schema": "https://opencode.ai/config.json", "plugin": []string{pkg}})
}

// pluginHome is a hermetic home whose OpenCode config names the plugin
// package at pkg.
func (g gen) pluginHome(t testing.TB, pkg string) string {
	t.Helper()
	home := g.newHome(t)
	g.usePlugin(t, home, pkg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the daemons' log:\n%s", pluginLog(home))
		}
	})
	return home
}

// debugLog is OpenCode's environment in which the daemons the plugin
// starts log at debug.
var debugLog = []string{"MCP_RECONNECT_LOG_LEVEL=debug"}

// daemonsIn lists the daemons registered in home's registry.
func daemonsIn(t testing.TB, home string) []registry.Entry {
	t.Helper()
	ents, err := (&registry.Registry{Dir: filepath.Join(home, "state", "mcp-reconnect", "daemons")}).List()
	if err != nil {
		t.Fatal(err)
	}
	return ents
}

// daemonFor waits until home's registry holds a daemon watching oc,
// whose status API answers with its event stream subscribed, and returns
// it.
func daemonFor(t testing.TB, home string, oc *OpenCode) registry.Entry {
	t.Helper()
	var e registry.Entry
	waitFor(t, 30*time.Second, "a daemon for "+oc.URL+" in the registry (log: "+pluginLog(home)+")", func() bool {
		i := slices.IndexFunc(daemonsIn(t, home), func(e registry.Entry) bool { return e.Watches(oc.URL) })
		if i >= 0 {
			e = daemonsIn(t, home)[i]
		}
		return i >= 0
	})
	(&Watcher{StatusAddr: e.StatusAddr}).WaitStreamUp(t, 30*time.Second)
	return e
}

// pluginLog is what the daemons the plugin started (and the plugin) logged.
func pluginLog(home string) string {
	b, _ := os.ReadFile(filepath.Join(home, "state", "mcp-reconnect", "mcp-reconnect.log"))
	return string(b)
}

// plugin daemons lists the live `mcp-reconnect watch --opencode-pid PID`
// processes, and the zombies among them.
func pluginDaemons(pid int) (live, zombies []int) {
	want := "watch\x00--opencode-pid\x00" + strconv.Itoa(pid) + "\x00"
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		switch {
		case strings.Contains(string(stat), ") Z ") && strings.HasPrefix(string(stat), e.Name()+" (mcp-reconnect)"):
			zombies = append(zombies, n)
		case strings.Contains(string(cmdline), want):
			live = append(live, n)
		}
	}
	return live, zombies
}

// readAll reads the MCP status of every directory at once, as clients
// opening them do: OpenCode loads its plugins in each.
func readAll(t *testing.T, oc *OpenCode, dirs []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(dirs))
	for _, d := range dirs {
		wg.Go(func() {
			if _, err := oc.OpenCode.Status(d); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// pluginRepairs is what the plugin does for one OpenCode server that it
// was loaded in, in ten directories at once: one daemon, which repairs a
// crashed stdio server and a restarted remote one, and which ends when
// OpenCode is killed (kill -9) and leaves nothing behind.
func pluginRepairs(t *testing.T, g gen, oc *OpenCode, home string) registry.Entry {
	t.Helper()
	p := g.newProject(t, nil)
	remote := newHTTPServer(t, p.ServerLog("rem"), "-strict-sessions")
	remote.Start(t)
	rewriteProject(t, p, map[string]any{"s": p.StdioServer("s"), "rem": RemoteServer(remote.URL)})
	dirs := []string{p.Dir}
	for range 9 {
		dirs = append(dirs, g.newProject(t, nil).Dir)
	}
	readAll(t, oc, dirs)
	e := daemonFor(t, home, oc)

	n, _ := p.KillConnected(t, oc, "s")
	p.WaitStarts(t, "s", n+1, 30*time.Second)
	oc.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)

	// The daemon watches a connected remote server's endpoint over a held
	// connection once a check has read it connected.
	w := &Watcher{StatusAddr: e.StatusAddr}
	waitFor(t, 20*time.Second, "the daemon to see rem connected", func() bool {
		st := serverState(t, w, p.Dir, "rem")
		return st != nil && st["status"] == "connected"
	})
	time.Sleep(time.Second)
	remote.Stop()
	time.Sleep(500 * time.Millisecond)
	remote.Start(t)
	waitFor(t, 20*time.Second, "a fresh initialize on the restarted remote server", func() bool {
		pids := p.Starts(t, "rem")
		return slices.ContainsFunc(p.ServerEvents(t, "rem"), func(ev serverEvent) bool { return ev.Event == "initialize" && ev.PID == pids[len(pids)-1] })
	})

	if ents := daemonsIn(t, home); len(ents) != 1 {
		t.Errorf("registered daemons: %+v, want one for %s", ents, oc.URL)
	}
	if live, _ := pluginDaemons(oc.PID()); len(live) != 1 {
		t.Errorf("daemons of OpenCode pid %d: %v, want one", oc.PID(), live)
	}
	log := pluginLog(home)
	for _, bad := range []string{"not watching", "waiting for it to end", "could not start", pluginPassword} {
		if strings.Contains(log, bad) {
			t.Errorf("the daemons' log says %q:\n%s", bad, log)
		}
	}
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", e.PID)); strings.Contains(string(cmdline), pluginPassword) {
		t.Error("the password is on the daemon's command line")
	}
	if strings.Contains(oc.Output.String(), "mcp-reconnect") {
		t.Errorf("OpenCode's output mentions mcp-reconnect:\n%s", oc.Output)
	}

	killOpenCode(t, oc)
	waitFor(t, 5*time.Second, "the daemon's end after OpenCode's", func() bool { return !running(e.PID) })
	if ents := daemonsIn(t, home); len(ents) != 0 {
		t.Errorf("still registered after OpenCode ended: %+v", ents)
	}
	if !strings.Contains(pluginLog(home), "opencode ended; stopping") {
		t.Errorf("the log does not say why the daemon stopped:\n%s", pluginLog(home))
	}
	return e
}

// Configured by the plugin alone, a plain `opencode serve --port P`
// loaded in ten directories gets one daemon, watching P, which repairs a
// crashed stdio server and a restarted remote one and ends with
// OpenCode.
func TestPluginWatchesItsOpenCode(t *testing.T) {
	pkg := npmPackage(t, true)
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.pluginHome(t, pkg)
		oc := g.start(t, ochost.Options{Home: home, Password: pluginPassword, Env: debugLog})
		pluginRepairs(t, g, oc, home)
	})
}

// The OpenCode 2 background service (`serve --service`), configured by
// the plugin alone: the daemon follows it through its service file, as
// a daemon started for the service would, and does the same for it.
func TestPluginWatchesTheOpenCode2Service(t *testing.T) {
	pkg := npmPackage(t, true)
	g := generations[1]
	needBinary(t, g.Bin, g.Name)
	home := g.pluginHome(t, pkg)
	oc := g.start(t, ochost.Options{Home: home, Service: true, Password: pluginPassword, Env: debugLog})
	e := pluginRepairs(t, g, oc, home)
	if e.Service != oc.ServiceFile() {
		t.Errorf("the daemon follows %q, want the service file %s", e.Service, oc.ServiceFile())
	}
}

// Two OpenCodes at once get a daemon each; one killed (kill -9) takes
// only its own daemon with it, and an OpenCode started at once on its
// port (before that daemon may have ended) gets a daemon of its own,
// which repairs it.
func TestPluginOneDaemonPerOpenCode(t *testing.T) {
	pkg := npmPackage(t, true)
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.pluginHome(t, pkg)
		a := g.start(t, ochost.Options{Home: home, Password: pluginPassword})
		b := g.start(t, ochost.Options{Home: home, Password: pluginPassword})
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		readAll(t, a, []string{p.Dir})
		readAll(t, b, []string{g.newProject(t, nil).Dir})
		da, db := daemonFor(t, home, a), daemonFor(t, home, b)
		if da.PID == db.PID || da.StatusAddr == db.StatusAddr {
			t.Fatalf("one daemon for two OpenCodes: %+v, %+v", da, db)
		}

		killOpenCode(t, a)
		again := g.start(t, ochost.Options{Home: home, Port: a.Port, Password: pluginPassword})
		waitFor(t, 5*time.Second, "the end of the killed OpenCode's daemon", func() bool { return !running(da.PID) })
		if !running(db.PID) {
			t.Fatal("the other OpenCode's daemon ended too")
		}
		// Another directory first starts the new OpenCode's daemon (OpenCode
		// loads its plugins per directory); p's server then connects while
		// that daemon's stream is up, and its event arms p (rule 3: a
		// directory booted before the stream was up is not the daemon's).
		readAll(t, again, []string{g.newProject(t, nil).Dir})
		d := daemonFor(t, home, again)
		if d.PID == da.PID {
			t.Fatalf("the new OpenCode is watched by the killed one's daemon")
		}
		readAll(t, again, []string{p.Dir})
		n, _ := p.KillConnected(t, again, "s")
		p.WaitStarts(t, "s", n+1, 30*time.Second)
		again.WaitStatus(t, p.Dir, "s", "connected", 30*time.Second)
		if ents := daemonsIn(t, home); len(ents) != 2 {
			t.Errorf("registered daemons: %+v, want the two OpenCodes' own", ents)
		}
	})
}

// OpenCode 1.1.65 calls every export of a plugin module as a plugin
// function, and fails every directory's requests on one that is not:
// with the plugin, 1.14.48 and 1.1.65 answer as without it, and get
// their daemon, which ends with them.
func TestPluginOnOldReleases(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	pkg := npmPackage(t, true)
	g := generations[0]
	for _, v := range oldReleases {
		t.Run(v, func(t *testing.T) {
			home := g.pluginHome(t, pkg)
			oc, err := ochost.Start(ochost.Options{Binary: installOpenCode(t, v), Home: home, Password: pluginPassword})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(oc.Kill)
			o := &OpenCode{OpenCode: oc}
			readAll(t, o, []string{g.newProject(t, nil).Dir})
			e := daemonFor(t, home, o)
			killOpenCode(t, o)
			waitFor(t, 5*time.Second, "the daemon's end after OpenCode's", func() bool { return !running(e.PID) })
		})
	}
}

// Without the platform package (optional dependencies left out) and
// with no mcp-reconnect on PATH, OpenCode starts and serves as without
// the plugin, shows nothing of it, and the plugin says why in the log
// file; with mcp-reconnect on PATH, that one is started.
func TestPluginWithoutItsBinary(t *testing.T) {
	pkg := npmPackage(t, false)
	bare := t.TempDir()
	onPath := t.TempDir()
	copyTo(t, reconnectBin, filepath.Join(onPath, "mcp-reconnect"), 0o755)
	forEachGeneration(t, func(t *testing.T, g gen) {
		home := g.pluginHome(t, pkg)
		oc := g.start(t, ochost.Options{Home: home, Password: pluginPassword, Env: []string{"PATH=" + bare}})
		p := g.newProject(t, nil)
		rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
		if st := oc.Status(t, p.Dir); st["s"].Status != "connected" {
			t.Fatalf("OpenCode with the plugin and no binary: %+v", st)
		}
		waitFor(t, 10*time.Second, "the plugin's note in the log", func() bool { return strings.Contains(pluginLog(home), "could not start mcp-reconnect") })
		if strings.Contains(oc.Output.String(), "mcp-reconnect") {
			t.Errorf("OpenCode's output mentions mcp-reconnect:\n%s", oc.Output)
		}
		if ents := daemonsIn(t, home); len(ents) != 0 {
			t.Errorf("registered: %+v", ents)
		}
		oc.Kill()

		oc = g.start(t, ochost.Options{Home: home, Password: pluginPassword, Env: []string{"PATH=" + onPath + ":" + os.Getenv("PATH")}})
		readAll(t, oc, []string{p.Dir})
		daemonFor(t, home, oc)
	})
}

// BenchmarkPluginStartup measures what the plugin adds to OpenCode's
// start: from exec to the first answer about a directory (the request
// that loads the plugins), median of 5 starts with and 5 without the
// plugin, interleaved, on each generation (and the 2.x service). Each
// start is in a new home; the OpenCode and its children (the daemon
// among them) are killed before the next.
//
//	flock -o /work/e2e.lock go test ./test/e2e -run '^$' -bench BenchmarkPluginStartup -benchtime 1x
func BenchmarkPluginStartup(b *testing.B) {
	pkg := npmPackage(b, true)
	type variant struct {
		name    string
		g       gen
		service bool
	}
	for _, v := range []variant{{generations[0].Name, generations[0], false}, {generations[1].Name, generations[1], false}, {generations[1].Name + " service", generations[1], true}} {
		b.Run(v.name, func(b *testing.B) {
			needBinary(b, v.g.Bin, v.g.Name)
			for range b.N {
				var with, without []time.Duration
				for i := range 10 {
					plugin := i%4 == 0 || i%4 == 3 // ABBA: neither kind always runs after the other
					home := v.g.newHome(b)
					if plugin {
						v.g.usePlugin(b, home, pkg)
					}
					dir := v.g.newProject(b, nil).Dir
					start := time.Now()
					oc, err := ochost.Start(ochost.Options{Binary: v.g.Bin, Generation: v.g.Gen, Home: home, Service: v.service, Password: pluginPassword})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := oc.Status(dir); err != nil {
						b.Fatal(err)
					}
					took := time.Since(start)
					oc.Kill()
					if plugin {
						with = append(with, took)
					} else {
						without = append(without, took)
					}
				}
				mw, mo := median(with), median(without)
				b.ReportMetric(mw.Seconds(), "s-with-plugin")
				b.ReportMetric(mo.Seconds(), "s-without")
				b.ReportMetric((mw - mo).Seconds(), "s-added")
				b.Logf("%s: with the plugin %v %v, without %v %v", v.name, mw, with, mo, without)
			}
		})
	}
}

// killOpenCode kills OpenCode's process alone, as `kill -9 PID` does
// (ochost's Kill also ends the process groups of OpenCode's children,
// the daemon's among them), and waits until it is gone.
func killOpenCode(t testing.TB, oc *OpenCode) {
	t.Helper()
	if err := syscall.Kill(oc.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "OpenCode's end", func() bool { return !running(oc.PID()) })
}

// copyTo copies a file, making its directory.
func copyTo(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(to), 0o755)
	}
	if err == nil {
		err = os.WriteFile(to, b, mode)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// running reports whether process pid runs (a zombie does not).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}
