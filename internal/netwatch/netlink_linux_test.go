package netwatch

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The netlink dumps see the interfaces the standard library sees: the
// parser reads this machine's real messages right.
func TestLinuxStateMatchesInterfaces(t *testing.T) {
	got, err := linuxState()
	if err != nil {
		t.Fatal(err)
	}
	want, err := interfaceState()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this machine: %s", describe(got))
	got.DefaultRoutes = nil // the standard library knows no routes
	if !got.Equal(want) {
		t.Fatalf("netlink: %s\nnet.Interfaces: %s", describe(got), describe(want))
	}
}

// Loopback and addresses that do not leave the machine never count.
func TestLinuxStateLeavesOutLoopback(t *testing.T) {
	s, err := linuxState()
	if err != nil {
		t.Fatal(err)
	}
	for name, ps := range s.Interfaces {
		if name == "lo" || len(ps) == 0 {
			t.Errorf("interface %s with %v counted", name, ps)
		}
		for _, p := range ps {
			if !p.Addr().IsGlobalUnicast() {
				t.Errorf("%s: %v is not global unicast", name, p)
			}
		}
	}
}

// interfaceState reads the interfaces through the standard library, the
// reference linuxState is held to; it knows no routes.
func interfaceState() (State, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return State{}, fmt.Errorf("netwatch: list interfaces: %w", err)
	}
	s := State{Interfaces: map[string][]netip.Prefix{}}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue // gone since the list was read: not up any more
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok || !counts(ip) {
				continue
			}
			ones, _ := ipn.Mask.Size()
			s.Interfaces[ifc.Name] = append(s.Interfaces[ifc.Name], netip.PrefixFrom(ip.Unmap(), ones))
		}
	}
	s.normalize()
	return s, nil
}

// While nothing happens, Run waits in the netpoller (no timer, no
// periodic wake-up), and it returns as soon as ctx ends.
func TestRunWaitsInNetpollerAndEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Netlink{}.Run(ctx, func(bool) {}) }()

	deadline := time.Now().Add(10 * time.Second)
	for !parkedInPoller() {
		select {
		case err := <-done:
			t.Fatalf("Run ended early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run is not waiting in the netpoller:\n%s", stacks())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after ctx ended = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Run did not return after ctx ended:\n%s", stacks())
	}
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

func parkedInPoller() bool {
	for _, g := range strings.Split(stacks(), "\n\n") {
		if strings.Contains(g, "[IO wait") && strings.Contains(g, "netwatch.watchSocket") {
			return true
		}
	}
	return false
}

// A ctx that has already ended ends Run before it waits at all.
func TestRunWithEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- Netlink{}.Run(ctx, func(bool) {}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run with an ended ctx did not return")
	}
}

// The real kernel, in a network namespace of its own: what counts as a
// change (an address, a default route, its replacement, its next hops,
// an interface going down) and what does not (loopback, a veth without a
// global address, an address refreshed); and which changes move the way
// out (Uplink: those of the default routes and of their interfaces'
// addresses) and which do not (an interface coming beside them).
func TestChangesInNamespace(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("network namespaces need root and iproute2 (ip), under CI too: %v, euid %d", err, os.Geteuid())
		}
		t.Skip("network namespaces need root and iproute2")
	}
	ns := fmt.Sprintf("mcpr-netwatch-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("ip netns add under CI: %v %s", err, out)
		}
		t.Skipf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	states := watchIn(t, ns)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	// next waits for the next change and checks it is want, and Uplink
	// or not as uplink says: a change that should not have been one shows
	// up here as the wrong state.
	next := func(want string, uplink bool) {
		t.Helper()
		select {
		case c := <-states:
			if got := describe(c.is); got != want {
				t.Fatalf("change to\n %q\nwant\n %q", got, want)
			}
			if got := Uplink(c.was, c.is); got != uplink {
				t.Fatalf("change to %q: Uplink %v, want %v", want, got, uplink)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no change to %q", want)
		}
	}

	// No change: loopback, a veth pair (link-local addresses only).
	ip("link", "set", "lo", "up")
	ip("link", "add", "mcpr0", "type", "veth", "peer", "name", "mcpr1")
	ip("link", "set", "mcpr1", "up")
	ip("link", "set", "mcpr0", "up")
	// Changes.
	ip("addr", "add", "198.51.100.1/24", "dev", "mcpr0")
	next("mcpr0=[198.51.100.1/24]", false)
	ip("-6", "addr", "add", "2001:db8:5::1/64", "dev", "mcpr0", "valid_lft", "300", "preferred_lft", "300")
	next("mcpr0=[198.51.100.1/24 2001:db8:5::/64]", false)
	// No change: the address refreshed with new lifetimes (and its
	// duplicate detection finishing).
	ip("-6", "addr", "change", "2001:db8:5::1/64", "dev", "mcpr0", "valid_lft", "600", "preferred_lft", "600")
	ip("route", "add", "default", "via", "198.51.100.254", "dev", "mcpr0")
	next("mcpr0=[198.51.100.1/24 2001:db8:5::/64] default4 via 198.51.100.254 dev mcpr0 metric 0", true)
	// The replaced route is gone: switching back later is a change.
	ip("route", "replace", "default", "via", "198.51.100.253", "dev", "mcpr0")
	next("mcpr0=[198.51.100.1/24 2001:db8:5::/64] default4 via 198.51.100.253 dev mcpr0 metric 0", true)
	// ECMP: a default route with two next hops.
	ip("link", "add", "mcpr2", "type", "veth", "peer", "name", "mcpr3")
	ip("link", "set", "mcpr3", "up")
	ip("link", "set", "mcpr2", "up")
	ip("addr", "add", "203.0.113.1/24", "dev", "mcpr2")
	next("mcpr0=[198.51.100.1/24 2001:db8:5::/64] mcpr2=[203.0.113.1/24] default4 via 198.51.100.253 dev mcpr0 metric 0", false)
	ip("route", "replace", "default", "nexthop", "via", "198.51.100.254", "dev", "mcpr0", "nexthop", "via", "203.0.113.254", "dev", "mcpr2")
	next("mcpr0=[198.51.100.1/24 2001:db8:5::/64] mcpr2=[203.0.113.1/24] "+
		"default4 via 198.51.100.254 dev mcpr0 metric 0 default4 via 203.0.113.254 dev mcpr2 metric 0", true)
	// An interface going down takes its next hop with it.
	ip("link", "set", "mcpr2", "down")
	next("mcpr0=[198.51.100.1/24 2001:db8:5::/64] default4 via 198.51.100.254 dev mcpr0 metric 0", true)
	// The kernel drops the default route with the address, silently.
	ip("addr", "del", "198.51.100.1/24", "dev", "mcpr0")
	next("mcpr0=[2001:db8:5::/64]", true)
	ip("link", "del", "mcpr0")
	next("", false)
	// A VPN that leaves the default route in place takes the world all
	// the same: OpenVPN's halves, wg-quick's default route in a table of
	// its own. A multicast route is no way out.
	ip("link", "add", "mcpr4", "type", "veth", "peer", "name", "mcpr5")
	ip("link", "set", "mcpr5", "up")
	ip("link", "set", "mcpr4", "up")
	ip("addr", "add", "192.0.2.1/24", "dev", "mcpr4")
	next("mcpr4=[192.0.2.1/24]", false)
	ip("route", "add", "224.0.0.0/4", "dev", "mcpr4")
	ip("route", "add", "0.0.0.0/1", "via", "192.0.2.254", "dev", "mcpr4")
	ip("route", "add", "128.0.0.0/1", "via", "192.0.2.254", "dev", "mcpr4")
	next("mcpr4=[192.0.2.1/24] default4 via 192.0.2.254 dev mcpr4 metric 0", true)
	ip("route", "add", "default", "dev", "mcpr4", "table", "51820")
	next("mcpr4=[192.0.2.1/24] default4 via invalid IP dev mcpr4 metric 0 default4 via 192.0.2.254 dev mcpr4 metric 0", true)
}

// change is one change watchSocket reports.
type change struct{ was, is State }

// watchIn watches network namespace ns until the test ends, and returns
// the changes it reports. The watching goroutine's thread enters ns and
// never leaves it (the runtime ends a thread still locked when its
// goroutine returns): the socket and each look are then ns's.
func watchIn(t *testing.T, ns string) <-chan change {
	t.Helper()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	ctx, cancel := context.WithCancel(context.Background())
	states := make(chan change, 16)
	ready, done := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("setns: %w", err)
			return
		}
		f, err := listen()
		ready <- err
		if err != nil {
			return
		}
		defer f.Close()
		done <- watchSocket(ctx, f, linuxState, func(was, is State) { states <- change{was, is} })
	}()
	if err := <-ready; err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	return states
}
