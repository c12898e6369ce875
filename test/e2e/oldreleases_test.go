package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// Releases before about 1.15 never report a dead stdio server: status
// stays "connected", no event comes, and the tools are gone until
// OpenCode restarts. The daemon watches OpenCode's MCP children and takes
// a child's exit as the crash report OpenCode never sends.
var oldReleases = []string{"1.14.48", "1.1.65"}

// installOpenCode installs release v of OpenCode from the npm registry
// (scripts/install-opencode.sh, into .cache/) and returns the binary. It
// skips only when npm is missing and CI is not set.
func installOpenCode(t testing.TB, v string) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil && os.Getenv("CI") == "" {
		t.Skipf("npm missing: cannot install OpenCode %s", v)
	}
	out, err := exec.Command(filepath.Join(repoRoot(), "scripts", "install-opencode.sh"), v).Output()
	if err != nil {
		t.Fatalf("installing OpenCode %s: %v", v, err)
	}
	return strings.TrimSpace(string(out))
}

// A stdio server killed on an old release that never reports it has a
// new, working child within 5 s: the daemon saw its process exit, read
// the directory after that (still "connected"), and connected it.
func TestOldReleaseStdioCrashRecovered(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, v := range oldReleases {
		t.Run(v, func(t *testing.T) {
			bin := installOpenCode(t, v)
			oc, err := ochost.Start(ochost.Options{Binary: bin})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(oc.Kill)
			o := &OpenCode{OpenCode: oc}
			p := newProject(t, nil)
			rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
			w := startWatch(t, o, oc.Password, "--directory", p.Dir)
			w.WaitLog(t, "watching opencode", 15*time.Second)
			p.WaitStarts(t, "s", 1, 30*time.Second)
			waitFor(t, 20*time.Second, "the daemon watching OpenCode's MCP processes", func() bool {
				return strings.Contains(w.Log.String(), "watching opencode's MCP processes")
			})
			time.Sleep(3 * time.Second) // the view has seen the child
			n, killed := p.KillConnected(t, o, "s")
			// 10 s: well under the idle check (30 s), the only other
			// repair on a release that never reports the crash.
			p.WaitStarts(t, "s", n+1, 10*time.Second)
			took := time.Since(killed)
			// The new child works: it answered OpenCode's initialize.
			waitFor(t, 10*time.Second, "the new child initialized", func() bool {
				n := 0
				for _, ev := range p.ServerEvents(t, "s") {
					if ev.Event == "initialize" {
						n++
					}
				}
				return n >= 2
			})
			t.Logf("OpenCode %s: a new, working child %v after the kill", v, took.Round(10*time.Millisecond))
			o.WaitStatus(t, p.Dir, "s", "connected", 10*time.Second)
			if !strings.Contains(w.Log.String(), "process exited but OpenCode still says connected") {
				t.Fatal("the daemon did not say it reconnected on the process evidence")
			}
		})
	}
}

// On an old release a stdio server is repaired each time it crashes: the
// child the daemon's own repair started is born after that repair's
// connect (both read on the kernel's clock), so its crash is news too.
// Killed three times, 5 s apart, on 1.14.48 and 1.1.65 (1.1.65 puts no
// OPENCODE_PID in its children's environment), it comes back each time.
func TestOldReleaseStdioCrashRepairedEachTime(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, v := range oldReleases {
		t.Run(v, func(t *testing.T) {
			bin := installOpenCode(t, v)
			oc, err := ochost.Start(ochost.Options{Binary: bin})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(oc.Kill)
			o := &OpenCode{OpenCode: oc}
			p := newProject(t, nil)
			rewriteProject(t, p, map[string]any{"s": p.StdioServer("s")})
			w := startWatch(t, o, oc.Password, "--directory", p.Dir)
			w.WaitLog(t, "watching opencode", 15*time.Second)
			p.WaitStarts(t, "s", 1, 30*time.Second)
			waitFor(t, 20*time.Second, "the daemon watching OpenCode's MCP processes", func() bool {
				return strings.Contains(w.Log.String(), "watching opencode's MCP processes")
			})
			time.Sleep(3 * time.Second) // the view has seen the child
			for crash := 1; crash <= 3; crash++ {
				starts := p.Starts(t, "s")
				killed := time.Now()
				killPID(t, starts[len(starts)-1])
				// Generous for -race on 2 cores: a crash loop's second
				// and third attempts come 1 and 2 s after the ones before.
				p.WaitStarts(t, "s", crash+1, 30*time.Second)
				t.Logf("OpenCode %s, crash %d: a new child %v after the kill", v, crash, time.Since(killed).Round(10*time.Millisecond))
				time.Sleep(5 * time.Second) // the new child serves
			}
			if st := o.Status(t, p.Dir); st["s"].Status != "connected" {
				t.Fatalf("status after the third repair: %+v", st)
			}
		})
	}
}
