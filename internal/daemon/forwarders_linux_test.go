//go:build linux

package daemon

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/procview"
)

// An OpenCode behind a port forwarder people use every day (Lima's host
// agent limactl, also behind Colima and Rancher Desktop; VS Code's
// forwarded ports of a devcontainer or Remote-SSH, code; cloudflared; a
// user's caddy reverse proxy) gets none of this machine's config files:
// what listens on its loopback port is a process of this user in this
// mount namespace, but the server does not say it is that process (a
// 1.x server reports no pid; one in a VM or a container reports its
// own, there). No list of names decides it.
func TestConfigFilesOfAPortForwarderAreNotRead(t *testing.T) {
	tab, err := procview.System()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"limactl", "code", "cloudflared", "caddy"} {
		port, _ := listenAs(t, name)
		client, err := opencode.NewServer(opencode.ServerOptions{URL: fmt.Sprintf("http://127.0.0.1:%d", port)})
		if err != nil {
			t.Fatal(err)
		}
		p := newProcWatch(nil, client, 0, slog.New(slog.DiscardHandler))
		for _, reported := range []int{0, 1, 43067} {
			if env := p.listenerConfigEnv(tab, opencode.V2, reported); env.Local {
				t.Errorf("a port published by %s (an OpenCode elsewhere behind it, reporting pid %d): this machine's config files are read for it", name, reported)
			}
		}
	}
}
