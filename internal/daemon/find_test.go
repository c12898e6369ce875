package daemon

import (
	"log/slog"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// (Watch finds OpenCode "when its listening socket …
// leads to a local process"; the brief: not a process that is not
// OpenCode). The 2.x pid is taken only when IsOpenCode says so, but the
// process listening on the loopback port is taken whatever it is: an
// `ssh -L 4096:…` tunnel to a remote OpenCode, socat, a reverse proxy.
// The daemon then watches that program's children as OpenCode's, and
// counts every real local OpenCode's MCP servers as children of "an
// OpenCode that is not watched" (orphans in status).
func TestProcessViewTakesOnlyOpenCodeListeners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the listener is found through /proc")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // this test binary: not OpenCode
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := opencode.NewServer(opencode.ServerOptions{URL: "http://" + ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	p := newProcWatch(nil, client, 0, slog.New(slog.DiscardHandler))
	pid, err := p.find(tab)
	if err == nil {
		self, _ := tab.Read(os.Getpid())
		t.Fatalf("find chose pid %d (argv %q, IsOpenCode %v) as the OpenCode process", pid, procview.Display(self.Argv), procview.IsOpenCode(self))
	}
}
