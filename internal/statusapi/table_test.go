package statusapi

import (
	"bytes"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
)

// `status` prints OpenCode's error strings, server names and directory
// paths, and an error string carries what a remote MCP server answered
// (1.x: "Streamable HTTP error: Error POSTing to endpoint (HTTP 400): …").
// None of it may reach the terminal as control: OSC 52 sets the clipboard
// in most terminals, CSI sequences and a bare "\r" rewrite what the table
// shows, U+202E reverses it (kubectl's CVE-2021-25743 is the same class).
func TestStatusTableEscapesControlCharacters(t *testing.T) {
	now := time.Now()
	st := Status{Servers: []OpenCodeStatus{{Snapshot: reconnect.Snapshot{
		URL:    "http://127.0.0.1:4096",
		Stream: reconnect.StreamState{LastError: "refused\x1b[31m"},
		Directories: []reconnect.DirSnapshot{{
			Directory: "/home/u/p\x1b]0;title\x07", ArmedBy: "session.updated",
			Servers: []reconnect.ServerSnapshot{{
				Name: "remote\u202e", Status: "failed",
				Error: "Streamable HTTP error: \x1b]52;c;Y3VybCBldmlsLnNofHNo\x07\r\x1b[2Kremote  connected\u009b",
			}},
		}, {
			Directory: "/home/u/q", LastError: "bad\tbody\n\x1b[1A",
		}},
	}, Service: &Service{File: "/s/service-\x1b[2J.json", PID: 7, AlsoRegistered: []string{"/s/service\r.json"}}}}}
	var b bytes.Buffer
	if err := WriteTable(&b, st, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if i := strings.IndexFunc(out, func(r rune) bool {
		return r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f || r == '\u202e'
	}); i >= 0 {
		t.Fatalf("status table holds control character %q at byte %d:\n%q", []rune(out[i:])[0], i, out)
	}
	for _, want := range []string{`\x1b]52;c;`, `\r`, `\u202e`, `/home/u/p\x1b]0;title\x07`, `bad\tbody\n`, `refused\x1b[31m`,
		`OpenCode 2 service of /s/service-\x1b[2J.json (pid 7)`, `also running, not followed: /s/service\r.json`} {
		if !strings.Contains(out, want) {
			t.Errorf("the table does not show %q escaped:\n%s", want, out)
		}
	}
}

// The process view of a local OpenCode is shown: its pid and children,
// each duplicate (directory, server, pids, masked command), and where to
// look for leftover processes (doctor: status does not search the whole
// process table). A command is anyone's text: escaped like the rest.
func TestStatusTableShowsProcesses(t *testing.T) {
	st := Status{Servers: []OpenCodeStatus{{Snapshot: reconnect.Snapshot{
		URL: "http://127.0.0.1:4096",
		Processes: &procview.Status{
			OpenCodePID: 4242, Children: 3,
			Servers: []procview.ServerRun{
				{Directory: "/home/u/my projéct", Server: "fs", PID: 510, Command: "npm exec @modelcontextprotocol/server-filesystem /home/u", Launcher: "npx", ServerPID: 530, ServerCommand: "node /home/u/.npm/_npx/1/node_modules/.bin/mcp-server-filesystem /home/u"},
				{Directory: "/home/u/my projéct", Server: "gh\x1b[2J", PID: 511, Command: "docker run -i --rm -e GITHUB_TOKEN=*** ghcr.io/github/github-mcp-server", Launcher: "docker run", InContainer: true},
				{Directory: "/home/u/my projéct", Server: "plain", PID: 512, Command: "/usr/local/bin/mcp-plain"},
				{Directory: "/home/u/my projéct", Server: "two", PID: 513, Command: "sh -c 'npm run build; node dist/index.js'", Launcher: "sh -c", ServerPID: 514, ServerCommand: "node dist/index.js", LauncherRunsOn: true},
			},
			Duplicates: []procview.ProcessGroup{{Directory: "/home/u/my projéct", Server: "gh", PIDs: []int{501, 733}, Command: "npx -y server-github --token ***"}},
		},
		Directories: []reconnect.DirSnapshot{{Directory: "/home/u/my projéct", ArmedBy: "flag"}},
	}}}}
	var b bytes.Buffer
	if err := WriteTable(&b, st, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"  processes: OpenCode pid 4242, 3 MCP children\n",
		"  /home/u/my projéct: fs  pid 510  npm exec @modelcontextprotocol/server-filesystem /home/u  (npx) → pid 530  node /home/u/.npm/_npx/1/node_modules/.bin/mcp-server-filesystem /home/u\n",
		`  /home/u/my projéct: gh\x1b[2J  pid 511  docker run -i --rm -e GITHUB_TOKEN=*** ghcr.io/github/github-mcp-server  (docker run; the server runs in a container)` + "\n",
		"  /home/u/my projéct: plain  pid 512  /usr/local/bin/mcp-plain\n",
		"  /home/u/my projéct: two  pid 513  sh -c 'npm run build; node dist/index.js'  (sh -c) → pid 514  node dist/index.js  [its launcher can outlive the server: a crash below it is seen when the launcher ends]\n",
		"  duplicate /home/u/my projéct: gh  pids 501, 733  npx -y server-github --token ***\n",
		"  MCP processes an OpenCode left behind: mcp-reconnect doctor finds them\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table has no %q:\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, '\x1b') {
		t.Errorf("a control character reached the table:\n%q", out)
	}

	// No process view: no processes line.
	st.Servers[0].Processes = nil
	b.Reset()
	_ = WriteTable(&b, st, time.Now())
	if strings.Contains(b.String(), "processes:") {
		t.Errorf("a processes line without a process view:\n%s", b.String())
	}
}

// A server the server rate limited says so, with when the next try comes
// (the attempt did not count); in JSON it is rate_limited beside
// next_attempt.
func TestStatusTableShowsARateLimit(t *testing.T) {
	now := time.Now()
	sv := reconnect.ServerSnapshot{Name: "r", Status: "failed", Error: "Error POSTing to endpoint: MCP endpoint cooldown after HTTP 429",
		Attempts: 2, Tier: reconnect.TierFast, RateLimited: true, NextAttempt: now.Add(7 * time.Second)}
	st := Status{Servers: []OpenCodeStatus{{Snapshot: reconnect.Snapshot{URL: "http://127.0.0.1:4096",
		Directories: []reconnect.DirSnapshot{{Directory: "/p", ArmedBy: "flag", Servers: []reconnect.ServerSnapshot{sv}}}}}}}
	var b bytes.Buffer
	if err := WriteTable(&b, st, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "rate limited by the server; next try in 7s") {
		t.Fatalf("the table does not say the server is rate limited:\n%s", b.String())
	}
	j, err := json.Marshal(sv)
	if err != nil || !strings.Contains(string(j), `"rate_limited":true`) {
		t.Fatalf("JSON = %s, %v; want rate_limited", j, err)
	}
}

// status shows what the daemon costs: its resident memory (now and at
// its peak) and its goroutines, read from the system for the daemon's
// own process.
func TestStatusShowsTheDaemonsOwnCost(t *testing.T) {
	var b bytes.Buffer
	st := Status{Daemon: &Daemon{PID: 4242, RSS: 24 << 20, PeakRSS: 31 << 20, Goroutines: 37}}
	if err := WriteTable(&b, st, time.Now()); err != nil {
		t.Fatal(err)
	}
	if want := "daemon pid 4242: 24.0 MiB resident (peak 31.0 MiB), 37 goroutines\n"; !strings.Contains(b.String(), want) {
		t.Errorf("the table has no %q:\n%s", want, b.String())
	}
	d := self()
	if d.PID != os.Getpid() || d.Goroutines < 1 {
		t.Errorf("self = %+v", d)
	}
	if runtime.GOOS == "linux" && (d.RSS <= 0 || d.PeakRSS < d.RSS) {
		t.Errorf("on Linux the daemon reads its own RSS: %+v", d)
	}
}
