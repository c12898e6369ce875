package netwatch

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A burst of changes is one notification, at most a second after it began.
func TestDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		changes := make(chan struct{}, 1)
		var fired atomic.Int64
		var at []time.Duration
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		t.Cleanup(func() { cancel(); <-done })
		go func() {
			defer close(done)
			Debounce(ctx, changes, 200*time.Millisecond, time.Second, func() {
				fired.Add(1)
				at = append(at, time.Since(start))
			})
		}()
		// A burst of 20 changes 50 ms apart (a VPN coming up).
		for range 20 {
			notify(changes)
			time.Sleep(50 * time.Millisecond)
		}
		synctest.Wait()
		if n := fired.Load(); n != 1 {
			t.Fatalf("notifications during a 1 s burst = %d, want 1 (at most 1 s after it began)", n)
		}
		if at[0] > time.Second {
			t.Fatalf("first notification at %v, want ≤ 1 s", at[0])
		}
		time.Sleep(2 * time.Second)
		notify(changes) // one lone change: 200 ms later
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		if n := fired.Load(); n != 2 {
			t.Fatalf("notifications = %d, want 2 (the burst, then the lone change)", n)
		}
		if d := at[1] - 3*time.Second; d < 150*time.Millisecond || d > 250*time.Millisecond {
			t.Fatalf("a lone change was notified %v after it, want about 200 ms", d)
		}
	})
}

// describe writes s on one line, for comparisons and failures.
func describe(s State) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(s.Interfaces)) {
		fmt.Fprintf(&b, "%s=%v ", name, s.Interfaces[name])
	}
	for _, r := range s.DefaultRoutes {
		fam := "default4"
		if r.IPv6 {
			fam = "default6"
		}
		fmt.Fprintf(&b, "%s via %v dev %s metric %d ", fam, r.Gateway, r.Interface, r.Metric)
	}
	return strings.TrimSpace(b.String())
}

// Uplink: only a change of the default routes, or an address gone from an
// interface one leaves by, can kill a held connection.
func TestUplink(t *testing.T) {
	p := netip.MustParsePrefix
	wifi := Route{Interface: "wlan0", Gateway: netip.MustParseAddr("192.168.1.1"), Metric: 600}
	home := State{Interfaces: map[string][]netip.Prefix{"wlan0": {p("192.168.1.20/24")}}, DefaultRoutes: []Route{wifi}}
	with := func(ifs map[string][]netip.Prefix, routes ...Route) State {
		s := State{Interfaces: ifs, DefaultRoutes: routes}
		s.normalize()
		return s
	}
	tun := Route{Interface: "tun0", Metric: 50}
	for _, c := range []struct {
		what string
		is   State
		want bool
	}{
		{"a container bridge comes up", with(map[string][]netip.Prefix{"wlan0": {p("192.168.1.20/24")}, "docker0": {p("172.17.0.1/16")}}, wifi), false},
		{"an address is added to the uplink", with(map[string][]netip.Prefix{"wlan0": {p("192.168.1.20/24"), p("2001:db8:1::/64")}}, wifi), false},
		{"the uplink's address is replaced", with(map[string][]netip.Prefix{"wlan0": {p("192.168.1.21/24")}}, wifi), true},
		{"a VPN takes the default route", with(map[string][]netip.Prefix{"wlan0": {p("192.168.1.20/24")}, "tun0": {p("10.8.0.2/24")}}, wifi, tun), true},
		{"the default route goes", with(map[string][]netip.Prefix{"wlan0": {p("192.168.1.20/24")}}), true},
		{"the gateway moves", with(map[string][]netip.Prefix{"wlan0": {p("192.168.1.20/24")}}, Route{Interface: "wlan0", Gateway: netip.MustParseAddr("192.168.1.254"), Metric: 600}), true},
	} {
		if got := Uplink(home, c.is); got != c.want {
			t.Errorf("%s: Uplink = %v, want %v", c.what, got, c.want)
		}
	}
	bridge := with(map[string][]netip.Prefix{"wlan0": {p("192.168.1.20/24")}, "docker0": {p("172.17.0.1/16")}}, wifi)
	if Uplink(bridge, home) {
		t.Error("a container bridge going away moved the way out")
	}
}
