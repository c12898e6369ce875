package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// startupBudget is how much later than OpenCode alone `run -- opencode
// serve` may answer HTTP in this test (the median of 5, interleaved). The
// target is 0.15 s, measured and recorded in BENCHMARKS.md; a
// start of OpenCode itself varies by a second on these machines, so the
// test holds a bound that no noise reaches and the cost it guards against
// (asking `opencode --version` before every start: 0.8-1.1 s) always
// does.
const startupBudget = 500 * time.Millisecond

// TestRunStartTime: starting OpenCode through the wrapper costs nothing a
// user notices, on either generation. `run -- opencode serve` and
// `opencode serve` alone start in turn (five rounds each, the order
// alternating, after one unmeasured start of each), and each is timed
// from its start to the first HTTP answer on its port. The wrapper's
// generation check (`opencode --version`, 1.2–1.4 s on 1.18.34) is paid
// by the unmeasured start only: its answer is remembered per binary.
// $MCP_RECONNECT_BENCH_BIN measures another build of the wrapper instead
// (BENCHMARKS.md's "before"), and MCP_RECONNECT_BENCH_ONCE=1 stops after
// the first measurement.
func TestRunStartTime(t *testing.T) {
	forEachGeneration(t, func(t *testing.T, g gen) {
		bin := reconnectBin
		if b := os.Getenv("MCP_RECONNECT_BENCH_BIN"); b != "" {
			bin = b
		}
		home := hermeticHome(t)
		const password = "startup-password"
		bare := func() *exec.Cmd {
			return exec.Command(g.Bin, "serve", "--port")
		}
		wrapped := func() *exec.Cmd {
			return exec.Command(bin, "run", "--log-file", home+"/run.log", "--status-addr", "127.0.0.1:0", "--", g.Bin, "serve", "--port")
		}
		measure := func(mk func() *exec.Cmd) time.Duration {
			port := freePort(t)
			cmd := mk()
			cmd.Args = append(cmd.Args, fmt.Sprint(port))
			// 2.x reads OPENCODE_SERVER_PASSWORD when OPENCODE_PASSWORD is unset.
			cmd.Env = append(ochost.Env(home), "OPENCODE_SERVER_PASSWORD="+password)
			cmd.Dir = home
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				_ = cmd.Wait()
			}()
			// Any answer counts (2.x answers this path with its web UI).
			url := fmt.Sprintf("http://127.0.0.1:%d/global/health", port)
			for time.Since(start) < 60*time.Second {
				if answers(url) {
					return time.Since(start)
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Fatalf("%v answered no HTTP within 60 s", cmd.Args)
			return 0
		}
		measure(bare)
		measure(wrapped) // asks --version once; the rest use the answer
		// This machine is shared: one measurement of five rounds can be thrown
		// off by another test suite's burst. The budget must hold in one of
		// three; every one is logged.
		var diff time.Duration
		for try := range 3 {
			var tb, tw []time.Duration
			for round := range 5 {
				if round%2 == 0 {
					tb = append(tb, measure(bare))
					tw = append(tw, measure(wrapped))
				} else {
					tw = append(tw, measure(wrapped))
					tb = append(tb, measure(bare))
				}
			}
			mb, mw := median(tb), median(tw)
			diff = mw - mb
			t.Logf("measurement %d: opencode serve alone: median %v %v", try+1, mb.Round(time.Millisecond), rounded(tb))
			t.Logf("measurement %d: run -- opencode serve: median %v %v", try+1, mw.Round(time.Millisecond), rounded(tw))
			t.Logf("measurement %d: difference of the medians: %v (budget %v)", try+1, diff.Round(time.Millisecond), startupBudget)
			if diff <= startupBudget || os.Getenv("MCP_RECONNECT_BENCH_ONCE") != "" {
				break
			}
		}
		if diff > startupBudget {
			t.Errorf("run -- opencode serve answers %v after OpenCode alone would (median of 5), budget %v", diff.Round(time.Millisecond), startupBudget)
		}
	})
}

// answers reports whether anything answers HTTP at url within a short
// timeout (a request in OpenCode's first half second can hang: ask again).
func answers(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func rounded(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(time.Millisecond)
	}
	return out
}

// `run` asks `opencode --version` once per binary, not at every start, and
// asks again when the binary changes, so an upgrade switches the wrapping:
// here an "opencode" script that counts the questions and runs the real
// 1.18.34, replaced by one that runs the real 2.1.2 (a 2.x serve gets
// 2.x's password variable, and is watched as 2.x), then by the 1.x one
// again. One test for the two generations: it is the move between them.
func TestRunRemembersTheGeneration(t *testing.T) {
	for _, g := range generations {
		needBinary(t, g.Bin, g.Name)
	}
	home := hermeticHome(t)
	dir := t.TempDir()
	count, envFile := filepath.Join(dir, "asked"), filepath.Join(dir, "env")
	// As npm installs it globally: bin/opencode links to a script in a
	// node_modules tree (a script elsewhere, a version manager's shim or
	// a wrapper of one's own, is asked every time).
	mods := filepath.Join(dir, "lib", "node_modules")
	real := filepath.Join(mods, "opencode-ai", "bin", "opencode")
	oc := filepath.Join(dir, "bin", "opencode")
	_ = os.MkdirAll(filepath.Dir(real), 0o755)
	_ = os.MkdirAll(filepath.Dir(oc), 0o755)
	if err := os.WriteFile(filepath.Join(mods, ".package-lock.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, oc); err != nil {
		t.Fatal(err)
	}
	install := func(g gen) {
		t.Helper()
		script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo asked >> " + count + "; fi\n" +
			"if [ \"$1\" = serve ]; then env > " + envFile + "; fi\nexec " + g.Bin + " \"$@\"\n"
		if err := os.WriteFile(real+".new", []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(real+".new", real); err != nil { // as an installer replaces a binary
			t.Fatal(err)
		}
	}
	asked := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "asked")
	}
	serve := func(g gen, want int) {
		t.Helper()
		_ = os.Remove(envFile)
		w := startRun(t, home, home, nil, nil, oc, "serve", "--port", fmt.Sprint(freePort(t)))
		w.waitLog(t, "generation="+g.Gen.String(), 60*time.Second)
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		w.wait(t, 15*time.Second)
		env, _ := os.ReadFile(envFile)
		if !strings.Contains("\n"+string(env), "\n"+g.PasswordVar+"=") {
			t.Fatalf("the %s serve was not started with its password variable %s; its environment:\n%s", g.Name, g.PasswordVar, redactEnv(env))
		}
		if n := asked(); n != want {
			t.Fatalf("--version asked %d times, want %d", n, want)
		}
	}
	v1, v2 := generations[0], generations[1]
	install(v1)
	serve(v1, 1)
	serve(v1, 1) // remembered
	install(v2)
	serve(v2, 2) // the file changed: asked again, and wrapped as 2.x
	serve(v2, 2)
	install(v1)
	serve(v1, 3)
}

// redactEnv shows the names of an environment dump, not its values.
func redactEnv(b []byte) string {
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(l, "="); ok {
			names = append(names, k)
		}
	}
	return strings.Join(names, " ")
}
