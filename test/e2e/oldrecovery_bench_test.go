package e2e

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// BenchmarkOldReleaseCrash measures, on OpenCode 1.14.48 (which never
// reports a dead stdio server), the time from killing a stdio server to
// the daemon's connect (the log line of the dead-child repair, whose
// timestamp the daemon's JSON log carries) and to the new server process
// answering OpenCode's initialize, for a server OpenCode runs directly
// and one configured through npx (npm's start-up, about half a second
// offline, comes on top of the second figure there). Five kills each.
//
//	OPENCODE_BIN=… go test -run '^$' -bench OldReleaseCrash -benchtime 1x ./test/e2e/
func BenchmarkOldReleaseCrash(b *testing.B) {
	const runs = 5
	for _, shape := range []string{"direct", "npx"} {
		b.Run("1.14.48/"+shape, func(b *testing.B) {
			bin := installOpenCode(b, "1.14.48")
			for range b.N {
				oc, err := ochost.Start(ochost.Options{Binary: bin})
				if err != nil {
					b.Fatal(err)
				}
				o := &OpenCode{OpenCode: oc}
				var toConnect, toServer []time.Duration
				projects := make([]*Project, runs)
				args := []string{"--log-format", "json"}
				for i := range projects {
					p := newProject(b, nil)
					name := fmt.Sprintf("s%d", i)
					srv := p.StdioServer(name)
					if shape == "npx" {
						srv = p.NpxServer(b, name)
					}
					rewriteProject(b, p, map[string]any{name: srv})
					projects[i] = p
					args = append(args, "--directory", p.Dir)
				}
				w := startWatch(b, o, oc.Password, args...)
				for i, p := range projects {
					p.WaitStarts(b, fmt.Sprintf("s%d", i), 1, 60*time.Second)
				}
				waitFor(b, 20*time.Second, "the daemon watching OpenCode's MCP processes", func() bool {
					return strings.Contains(w.Log.String(), "watching opencode's MCP processes")
				})
				for i, p := range projects {
					name := fmt.Sprintf("s%d", i)
					time.Sleep(3 * time.Second) // settled: a scan-based view has seen the child
					log := len(w.Log.String())
					n, killed := p.KillConnected(b, o, name)
					p.WaitStarts(b, name, n+1, 30*time.Second)
					waitFor(b, 10*time.Second, "the new server initialized", func() bool {
						n := 0
						for _, ev := range p.ServerEvents(b, name) {
							if ev.Event == "initialize" {
								n++
							}
						}
						return n >= 2
					})
					toServer = append(toServer, time.Since(killed))
					if at, ok := logTime(w.Log.String()[log:], "process exited but OpenCode still says connected"); ok {
						toConnect = append(toConnect, at.Sub(killed))
					}
				}
				oc.Kill()
				fmt.Printf("%s: kill → connect %v; kill → new server initialized %v\n", b.Name(), toConnect, toServer)
				if len(toConnect) > 0 {
					reportAs(b, toConnect, "connect")
				}
				reportAs(b, toServer, "server")
			}
		})
	}
}

// logTime is the time of the first JSON log line holding msg.
func logTime(log, msg string) (time.Time, bool) {
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, msg) {
			continue
		}
		i := strings.Index(line, `"time":"`)
		if i < 0 {
			continue
		}
		rest := line[i+len(`"time":"`):]
		if j := strings.IndexByte(rest, '"'); j > 0 {
			if t, err := time.Parse(time.RFC3339Nano, rest[:j]); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

func reportAs(b *testing.B, took []time.Duration, what string) {
	sorted := slices.Sorted(slices.Values(took))
	b.ReportMetric(sorted[len(sorted)/2].Seconds(), what+"-median-s")
	b.ReportMetric(sorted[len(sorted)-1].Seconds(), what+"-max-s")
}
