//go:build linux

// Network namespaces (ip netns, setns) exist only on Linux.

package e2e

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-reconnect/mcp-reconnect/internal/daemon"
	"github.com/mcp-reconnect/mcp-reconnect/internal/netwatch"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/reconnect"
	"github.com/mcp-reconnect/mcp-reconnect/test/ochost"
)

// nsSource is the machine's source of network changes, run in network
// namespace ns.
type nsSource struct{ ns string }

func (s nsSource) Run(ctx context.Context, changed func(uplink bool)) error {
	target, err := os.Open("/run/netns/" + s.ns)
	if err != nil {
		return err
	}
	defer target.Close()
	// This goroutine's thread enters ns for good (never unlocked: the
	// runtime ends the thread with the goroutine).
	runtime.LockOSThread()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return err
	}
	return netwatch.New().Run(ctx, changed)
}

// An interface that comes up beside an unchanged default route and
// uplink (docker's bridge when its daemon starts, the br-<id> of every
// `docker compose up`, libvirt's virbr0) carries no held connection: it
// proves nothing about OpenCode's sessions, so no connected remote server
// is connected again, though the change is seen. A VPN taking over the
// default route then does renew it, once. The daemon runs in-process
// against the fake OpenCode, its source of network changes on the real
// kernel, in a namespace of its own.
func TestBridgeBesideTheUplinkRenewsNoRemoteSession(t *testing.T) {
	ns := newNetns(t)
	ip := func(args ...string) { t.Helper(); nsRun(t, ns, append([]string{"ip"}, args...)...) }
	// The machine's uplink and default route, before the daemon starts.
	ip("link", "add", "uplink0", "type", "veth", "peer", "name", "uplink1")
	ip("link", "set", "uplink1", "up")
	ip("link", "set", "uplink0", "up")
	ip("addr", "add", "198.51.100.1/24", "dev", "uplink0")
	ip("route", "add", "default", "via", "198.51.100.254", "dev", "uplink0")

	const host = "opencode-netbridge:4096"
	fake := fakeopencode.New(map[string]fakeopencode.Spec{
		"web": {Type: "remote", URL: "http://remote.test:9000/mcp"},
		"fs":  {},
	})
	fake.Password = "pw"
	hosts := fakeopencode.NewHosts()
	hosts.Serve(host, fake)
	logs := &ochost.Buffer{}
	cfg := daemon.Config{
		Servers:     []daemon.Target{{URL: "http://" + host, Password: "pw", Transport: hosts.Transport()}},
		Directories: []string{"/p"},
		Engine:      reconnect.DefaultConfig, NoProbes: true, NoToasts: true, NoProcessView: true,
		NetSource: nsSource{ns},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}()
	defer func() {
		cancel()
		<-done
		hosts.Close()
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	waitFor(t, 30*time.Second, "the daemon reading /p", func() bool { return fake.Count("", "/p", "") > 0 })
	time.Sleep(2 * time.Second)
	if n := fake.Count("/mcp/{name}/connect", "/p", ""); n != 0 {
		t.Fatalf("setup: %d connects before the change", n)
	}

	// docker's bridge comes up (no container yet: no carrier).
	ip("link", "add", "docker0", "type", "bridge")
	ip("addr", "add", "172.17.0.1/16", "dev", "docker0")
	ip("link", "set", "docker0", "up")
	waitFor(t, 10*time.Second, "the daemon seeing the bridge", func() bool {
		return strings.Contains(logs.String(), `msg="network changed" uplink=false`)
	})
	time.Sleep(3 * time.Second) // a renewal would come initial-delay (1 s) after the change
	if n := fake.Count("/mcp/{name}/connect", "/p", "web"); n != 0 {
		t.Fatalf("a bridge that carries nothing came up (the uplink and default route unchanged): the connected remote server was connected again %d times", n)
	}

	// A VPN: its tunnel, its address, the default route through it.
	ip("link", "add", "vpn0", "type", "veth", "peer", "name", "vpn1")
	ip("link", "set", "vpn1", "up")
	ip("link", "set", "vpn0", "up")
	ip("addr", "add", "203.0.113.7/24", "dev", "vpn0")
	ip("route", "replace", "default", "via", "203.0.113.254", "dev", "vpn0")
	waitFor(t, 10*time.Second, "the remote session renewed after the VPN took the default route", func() bool {
		return fake.Count("/mcp/{name}/connect", "/p", "web") > 0
	})
	time.Sleep(3 * time.Second)
	if n := fake.Count("/mcp/{name}/connect", "/p", "web"); n != 1 {
		t.Fatalf("the remote server was connected %d times after the VPN took the default route, want once", n)
	}
	if n := fake.Count("/mcp/{name}/connect", "/p", "fs"); n != 0 {
		t.Fatalf("%d connects of the connected local server", n)
	}
}
