package netwatch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The dump read through netlink sees the interfaces the standard library
// sees: the parser reads this machine's real messages right.
func TestDumpMatchesInterfaces(t *testing.T) {
	c, err := listen()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no netlink under CI: %v", err)
		}
		t.Skipf("no netlink here: %v", err)
	}
	defer c.close()
	tr, err := c.dump()
	if err != nil {
		t.Fatal(err)
	}
	want, err := interfaceState()
	if err != nil {
		t.Fatal(err)
	}
	got := tr.state()
	got.DefaultRoutes = nil // the standard library knows no routes
	if !got.Equal(want) {
		t.Fatalf("netlink dump: %s\nnet.Interfaces: %s", describe(got), describe(want))
	}
	t.Logf("this machine: %s", describe(tr.state()))
}

// While nothing happens, Run waits in the netpoller (no timer, no
// periodic wake-up), and it returns as soon as ctx ends.
func TestRunWaitsInNetpollerAndEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Netlink{}.Run(ctx, make(chan struct{}, 1)) }()

	// The old loop sat in recvfrom with a 500 ms timeout: its goroutine
	// was "[syscall]" or running, never parked in the poller.
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
		if strings.Contains(g, "[IO wait") && strings.Contains(g, "netwatch.(*conn).read") {
			return true
		}
	}
	return false
}

// The real kernel's messages, in a network namespace of their own: what
// a veth, an address refresh, a route replace and a removal produce.
func TestKernelMessagesInNamespace(t *testing.T) {
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
	c := listenIn(t, ns)
	defer c.close()

	ctx, cancel := context.WithCancel(context.Background())
	states := make(chan State, 16)
	done := make(chan error, 1)
	go func() { done <- c.run(ctx, func(s State) { states <- s }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	// next waits for the next change and checks it is want: a change
	// that should not have been one shows up here as the wrong state.
	next := func(want string) {
		t.Helper()
		select {
		case s := <-states:
			if got := describe(s); got != want {
				t.Fatalf("change to\n %q\nwant\n %q", got, want)
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
	next("mcpr0=[198.51.100.1/24]")
	ip("-6", "addr", "add", "2001:db8:5::1/64", "dev", "mcpr0", "valid_lft", "300", "preferred_lft", "300")
	next("mcpr0=[198.51.100.1/24 2001:db8:5::/64]")
	// No change: the address refreshed with new lifetimes (and its
	// duplicate detection finishing).
	ip("-6", "addr", "change", "2001:db8:5::1/64", "dev", "mcpr0", "valid_lft", "600", "preferred_lft", "600")
	ip("route", "add", "default", "via", "198.51.100.254", "dev", "mcpr0")
	next("mcpr0=[198.51.100.1/24 2001:db8:5::/64] default4 via 198.51.100.254 dev mcpr0 metric 0")
	ip("route", "replace", "default", "via", "198.51.100.253", "dev", "mcpr0")
	next("mcpr0=[198.51.100.1/24 2001:db8:5::/64] default4 via 198.51.100.253 dev mcpr0 metric 0")
	// The kernel drops the default route with the address, silently.
	ip("addr", "del", "198.51.100.1/24", "dev", "mcpr0")
	next("mcpr0=[2001:db8:5::/64]")
	ip("link", "del", "mcpr0")
	next("")
}

// listenIn opens the netlink socket inside network namespace ns: a socket
// stays in the namespace it was made in.
func listenIn(t *testing.T, ns string) *conn {
	t.Helper()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("setns: %v", err)
	}
	c, lerr := listen()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// This thread is stuck in ns; leaving it locked makes the runtime
		// end it with this goroutine.
		t.Fatalf("setns back: %v", err)
	}
	runtime.UnlockOSThread()
	if lerr != nil {
		t.Fatal(lerr)
	}
	return c
}

// A ctx that has already ended ends Run before it waits at all.
func TestRunWithEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- Netlink{}.Run(ctx, make(chan struct{}, 1)) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run with an ended ctx did not return")
	}
}
