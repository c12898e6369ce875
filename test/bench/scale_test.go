// Package bench measures the mcp-reconnect daemon at scale: the real binary
// (built here) against the in-process fake OpenCode on loopback. Run it with
// `make bench`; results go to BENCHMARKS.md. It is a benchmark, not a test:
// it asserts nothing about speed.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// BenchmarkScale: 1,000 armed directories × 10 servers, 10% failing for
// good, default flags. After the fast episodes it measures an idle window
// (BENCH_IDLE, default 60s, after BENCH_WARMUP, default 40s), then crashes one server in each of 200
// directories and measures the delay from each mcp.tools.changed to its
// connect call. BENCH_ARGS adds flags to the daemon's command line.
func BenchmarkScale(b *testing.B) {
	const dirs, perDir = 1000, 10
	idle := envDuration("BENCH_IDLE", 60*time.Second)
	bin := filepath.Join(b.TempDir(), "mcp-reconnect")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/mcp-reconnect").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	speed := hostSpeed(b)
	for range b.N {
		specs := map[string]fakeopencode.Spec{}
		for i := range perDir - 1 {
			specs[fmt.Sprintf("s%d", i)] = fakeopencode.Spec{}
		}
		specs["dead"] = fakeopencode.Spec{Status: "failed", Error: "Connection closed"}
		fake := fakeopencode.New(specs)
		fake.SetHeartbeat(10 * time.Second)
		hs := httptest.NewServer(fake)
		var list []string
		for i := range dirs {
			list = append(list, fmt.Sprintf("/bench/dir %04d", i))
		}
		statusAddr := freeAddr(b)
		args := append([]string{"watch", "--url", hs.URL, "--status-addr", statusAddr, "--log-level", "warn"}, strings.Fields(os.Getenv("BENCH_ARGS"))...)
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "MCP_RECONNECT_DIRECTORY="+strings.Join(list, ":"))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		pid := cmd.Process.Pid
		if dir := os.Getenv("BENCH_PROFILE"); dir != "" {
			// The arming of a thousand directories at once is where the
			// peak is made: heap profiles of its first seconds.
			go func() {
				start := time.Now()
				for _, at := range []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second} {
					time.Sleep(time.Until(start.Add(at)))
					profile(b, dir, statusAddr, "heap", fmt.Sprintf("heap-%v", at))
				}
			}()
		}

		// Fast episodes: 1+2+4+8+16 s, stretched by the connect budget.
		time.Sleep(envDuration("BENCH_WARMUP", 40*time.Second))
		rssWarm := peakRSS(b, pid) // the high-water mark: where the peak was made
		if dir := os.Getenv("BENCH_PROFILE"); dir != "" {
			profile(b, dir, statusAddr, "heap", "heap-warmup")
			b.Logf("after the warm-up: peak RSS %.1f MiB, resident %.1f MiB, heap in use %.1f MiB", peakRSS(b, pid), scrape(b, statusAddr, "process_resident_memory_bytes")/(1<<20), scrape(b, statusAddr, "go_memstats_heap_inuse_bytes")/(1<<20))
		}
		fake.ResetRequests()
		cpu0, t0 := cpuTicks(b, pid), time.Now()
		if dir := os.Getenv("BENCH_PROFILE"); dir != "" {
			// A CPU profile of the idle window's second half (its cost,
			// a few percent of the figure, is in the idle CPU then).
			go func() {
				time.Sleep(idle / 2)
				profile(b, dir, statusAddr, fmt.Sprintf("profile?seconds=%d", int(idle.Seconds()/2)-1), "cpu")
			}()
		}
		time.Sleep(idle)
		cpu1, t1 := cpuTicks(b, pid), time.Now()
		rssIdle := peakRSS(b, pid)
		window := t1.Sub(t0)
		reads := fake.Count("/mcp", "", "")
		connects := fake.Count("/mcp/{name}/connect", "", "")
		configs := fake.Count("/config", "", "")
		perMin := func(n int) float64 { return float64(n) / window.Minutes() }
		cpuPct := float64(cpu1-cpu0) / clockTicks / window.Seconds() * 100
		goroutines := scrape(b, statusAddr, "go_goroutines")
		view := processView(b, statusAddr)
		// Where the daemon's memory is at idle, as the Go runtime counts it.
		mem := map[string]float64{}
		for _, m := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_memstats_next_gc_bytes", "process_resident_memory_bytes"} {
			mem[m] = scrape(b, statusAddr, m) / (1 << 20)
		}

		// Event to connect: crash s0 in 200 directories, 50 ms apart.
		fake.ResetRequests()
		sent := map[string]time.Time{}
		order := rand.Perm(dirs)[:200]
		for _, i := range order {
			d := list[i]
			fake.SetAfterConnect(d, "s0", "connected")
			sent[d] = time.Now()
			fake.Crash(d, "s0")
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(3 * time.Second)
		var lat []time.Duration
		for _, r := range fake.Requests() {
			if r.Route == "/mcp/{name}/connect" && r.Name == "s0" {
				if t, ok := sent[r.Directory]; ok {
					lat = append(lat, r.Time.Sub(t))
					delete(sent, r.Directory)
				}
			}
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		rss := peakRSS(b, pid)
		if dir := os.Getenv("BENCH_PROFILE"); dir != "" {
			profiles(b, dir, statusAddr)
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		hs.Close()

		if len(sent) != 0 {
			b.Errorf("%d crashes were never connected", len(sent))
		}
		p50, p99 := pct(lat, 0.50), pct(lat, 0.99)
		b.ReportMetric(rss, "peak-RSS-MiB")
		b.ReportMetric(cpuPct, "idle-CPU-%core")
		b.ReportMetric(goroutines, "goroutines")
		b.ReportMetric(perMin(reads), "status-reads/min")
		b.ReportMetric(float64(speed.Microseconds()), "host-status-read-µs")
		b.ReportMetric(perMin(connects), "connects/min")
		b.ReportMetric(perMin(configs), "config-reads/min")
		b.ReportMetric(float64(p50.Milliseconds()), "event-to-connect-p50-ms")
		b.ReportMetric(float64(p99.Milliseconds()), "event-to-connect-p99-ms")
		fmt.Printf("\n| measure | value | target |\n|---|---|---|\n")
		fmt.Printf("| peak RSS of the daemon | %.1f MiB | ≤ 32 MiB |\n", rss)
		fmt.Printf("| peak RSS by the end of the warm-up, the idle window | %.1f MiB, %.1f MiB | |\n", rssWarm, rssIdle)
		fmt.Printf("| CPU while idle | %.2f %% of a core | ≤ 0.5 %% |\n", cpuPct)
		fmt.Printf("| goroutines | %.0f | |\n", goroutines)
		fmt.Printf("| status reads per minute (idle) | %.0f | %d (1,000 dirs / 30 s idle interval) |\n", perMin(reads), dirs*2)
		fmt.Printf("| connects per minute (idle) | %.0f | 0 (the slow tier's next attempts fall 5 min after the 16 s one) |\n", perMin(connects))
		fmt.Printf("| config reads per minute (idle) | %.0f | 0 |\n", perMin(configs))
		fmt.Printf("| mcp.tools.changed → connect p50 | %v | |\n", p50.Round(time.Millisecond))
		fmt.Printf("| mcp.tools.changed → connect p99 | %v | ≤ 1.1 s (initial-delay + 100 ms) |\n", p99.Round(time.Millisecond))
		fmt.Printf("| idle window | %v | |\n", window.Round(time.Second))
		fmt.Printf("| process view | %s | on (BENCH_NO_VIEW=1: off) |\n", view)
		fmt.Printf("| host speed: a status read in process, one processor | %v | 44–48 µs here when fast, 65–72 µs when slow (BENCHMARKS.md, third round) |\n\n", speed.Round(time.Microsecond))
		fmt.Printf("| memory at idle (MiB) | heap in use | heap idle (released) | next GC at | goroutine stacks | runtime total (sys) | resident |\n|---|---|---|---|---|---|---|\n")
		fmt.Printf("| | %.1f | %.1f (%.1f) | %.1f | %.1f | %.1f | %.1f |\n\n", mem["go_memstats_heap_inuse_bytes"], mem["go_memstats_heap_idle_bytes"], mem["go_memstats_heap_released_bytes"],
			mem["go_memstats_next_gc_bytes"], mem["go_memstats_stack_inuse_bytes"], mem["go_memstats_sys_bytes"], mem["process_resident_memory_bytes"])
	}
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100.0

func cpuTicks(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name in parentheses; utime and stime are
	// fields 14 and 15.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

func peakRSS(b *testing.B, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// profiles saves the daemon's heap, allocation and goroutine profiles
// into dir (BENCH_PROFILE=dir), read with the token from the registry of
// running daemons; `go tool pprof -top -sample_index=inuse_space
// dir/heap.pb.gz` breaks them down.
func profiles(b *testing.B, dir, addr string) {
	for _, name := range []string{"heap", "allocs", "goroutine"} {
		profile(b, dir, addr, name, name)
	}
}

// profile saves one profile of the daemon at addr as dir/name.pb.gz.
func profile(b *testing.B, dir, addr, path, name string) {
	reg, err := registry.Default()
	if err != nil {
		b.Error(err)
		return
	}
	e, ok, err := reg.ByStatusAddr(addr)
	if err != nil || !ok {
		b.Errorf("no registry entry for the daemon at %s: %v", addr, err)
		return
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Error(err)
		return
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/debug/pprof/"+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Errorf("profile %s: %d %v", name, resp.StatusCode, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".pb.gz"), body, 0o600); err != nil {
		b.Error(err)
	}
}

// processView says whether the daemon watches OpenCode's processes, from
// its status: "on (OpenCode pid N)" or "off".
func processView(b *testing.B, addr string) string {
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Servers []struct {
			Processes *struct {
				OpenCodePID int `json:"opencode_pid"`
			} `json:"processes"`
		} `json:"servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		b.Fatal(err)
	}
	if len(st.Servers) == 1 && st.Servers[0].Processes != nil {
		return fmt.Sprintf("on (OpenCode pid %d)", st.Servers[0].Processes.OpenCodePID)
	}
	return "off"
}

func scrape(b *testing.B, addr, metric string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), metric+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return 0
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
