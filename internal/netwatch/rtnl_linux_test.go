package netwatch

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The messages below are rtnetlink messages as the kernel sends them,
// built from the kernel's structs (x/sys/unix) and fed to the tracker as
// raw bytes, the way they arrive on the socket.

func nlmsg(typ, flags uint16, body ...any) []byte {
	var b bytes.Buffer
	for _, part := range body {
		if err := binary.Write(&b, binary.NativeEndian, part); err != nil {
			panic(err)
		}
	}
	var h bytes.Buffer
	hdr := unix.NlMsghdr{Len: uint32(unix.NLMSG_HDRLEN + b.Len()), Type: typ, Flags: flags}
	if err := binary.Write(&h, binary.NativeEndian, hdr); err != nil {
		panic(err)
	}
	return append(h.Bytes(), b.Bytes()...)
}

// rta is one struct rtattr with its value, padded to 4 bytes.
func rta(typ uint16, val []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.SizeofRtAttr+len(val)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func ip(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

const (
	up = unix.IFF_UP | unix.IFF_RUNNING | unix.IFF_LOWER_UP
)

// link is RTM_NEWLINK (or RTM_DELLINK) for interface index named name.
func link(typ uint16, index int32, flags uint32, name string, extra ...[]byte) []byte {
	attrs := rta(unix.IFLA_IFNAME, append([]byte(name), 0))
	for _, e := range extra {
		attrs = append(attrs, e...)
	}
	return nlmsg(typ, 0, unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: index, Flags: flags, Change: 0xffffffff}, attrs)
}

// addr is RTM_NEWADDR (or RTM_DELADDR) of prefix on interface index.
func addr(typ uint16, index uint32, prefix string, flags uint32, extra ...[]byte) []byte {
	p := netip.MustParsePrefix(prefix)
	fam, scope := uint8(unix.AF_INET), uint8(unix.RT_SCOPE_UNIVERSE)
	if p.Addr().Is6() {
		fam = unix.AF_INET6
	}
	if p.Addr().IsLinkLocalUnicast() {
		scope = unix.RT_SCOPE_LINK
	}
	if p.Addr().IsLoopback() {
		scope = unix.RT_SCOPE_HOST
	}
	attrs := rta(unix.IFA_ADDRESS, p.Addr().AsSlice())
	if fam == unix.AF_INET {
		attrs = append(attrs, rta(unix.IFA_LOCAL, p.Addr().AsSlice())...)
	}
	attrs = append(attrs, rta(unix.IFA_FLAGS, u32(flags))...)
	for _, e := range extra {
		attrs = append(attrs, e...)
	}
	return nlmsg(typ, 0, unix.IfAddrmsg{Family: fam, Prefixlen: uint8(p.Bits()), Flags: uint8(flags), Scope: scope, Index: index}, attrs)
}

// cacheinfo is IFA_CACHEINFO: the lifetimes an IPv6 refresh renews.
func cacheinfo(preferred, valid uint32) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.NativeEndian, unix.IfaCacheinfo{Prefered: preferred, Valid: valid, Cstamp: 100, Tstamp: 4000})
	return rta(unix.IFA_CACHEINFO, b.Bytes())
}

// dflt is a default route message in table (main unless given) via gw
// (none if "") out of interface oif.
func dflt(typ, nlflags uint16, v6 bool, oif uint32, gw string, metric uint32, extra ...[]byte) []byte {
	fam := uint8(unix.AF_INET)
	if v6 {
		fam = unix.AF_INET6
	}
	attrs := rta(unix.RTA_TABLE, u32(unix.RT_TABLE_MAIN))
	attrs = append(attrs, rta(unix.RTA_OIF, u32(oif))...)
	if gw != "" {
		attrs = append(attrs, rta(unix.RTA_GATEWAY, ip(gw))...)
	}
	attrs = append(attrs, rta(unix.RTA_PRIORITY, u32(metric))...)
	for _, e := range extra {
		attrs = append(attrs, e...)
	}
	return nlmsg(typ, nlflags, unix.RtMsg{Family: fam, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_DHCP,
		Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST}, attrs)
}

// inTable is dflt moved to another routing table (policy routing).
func inTable(msg []byte, table uint32) []byte {
	b := slices.Clone(msg)
	b[unix.NLMSG_HDRLEN+4] = byte(table) // rtm_table, for tables below 256
	off := unix.NLMSG_HDRLEN + unix.SizeofRtMsg
	binary.NativeEndian.PutUint32(b[off+unix.SizeofRtAttr:], table) // RTA_TABLE comes first
	return b
}

// laptop is a dump of a laptop on Wi-Fi with docker installed.
func laptop() [][]byte {
	return [][]byte{
		link(unix.RTM_NEWLINK, 1, up|unix.IFF_LOOPBACK, "lo"),
		link(unix.RTM_NEWLINK, 2, up|unix.IFF_BROADCAST|unix.IFF_MULTICAST, "wlan0"),
		link(unix.RTM_NEWLINK, 3, unix.IFF_UP|unix.IFF_BROADCAST|unix.IFF_MULTICAST, "docker0"), // no carrier yet
		addr(unix.RTM_NEWADDR, 1, "127.0.0.1/8", unix.IFA_F_PERMANENT),
		addr(unix.RTM_NEWADDR, 1, "::1/128", unix.IFA_F_PERMANENT),
		addr(unix.RTM_NEWADDR, 2, "192.168.1.23/24", 0),
		addr(unix.RTM_NEWADDR, 2, "2001:db8:1::23/64", unix.IFA_F_MANAGETEMPADDR, cacheinfo(14400, 86400)),
		addr(unix.RTM_NEWADDR, 2, "2001:db8:1::9e4f:1/64", unix.IFA_F_TEMPORARY, cacheinfo(3600, 86400)),
		addr(unix.RTM_NEWADDR, 2, "fe80::1c2:3/64", unix.IFA_F_PERMANENT),
		addr(unix.RTM_NEWADDR, 3, "172.17.0.1/16", unix.IFA_F_PERMANENT),
		dflt(unix.RTM_NEWROUTE, 0, false, 2, "192.168.1.1", 600),
		dflt(unix.RTM_NEWROUTE, 0, true, 2, "fe80::1", 600),
	}
}

// feed parses msgs as the socket delivers them (one datagram) and applies
// them.
func feed(t *testing.T, tr *tracker, msgs ...[]byte) {
	t.Helper()
	parsed, err := syscall.ParseNetlinkMessage(bytes.Join(msgs, nil))
	if err != nil {
		t.Fatalf("test message does not parse: %v", err)
	}
	if len(parsed) != len(msgs) {
		t.Fatalf("parsed %d messages from %d", len(parsed), len(msgs))
	}
	for _, m := range parsed {
		tr.apply(m)
	}
}

func TestLaptopState(t *testing.T) {
	tr := newTracker()
	feed(t, tr, laptop()...)
	got := describe(tr.state())
	want := "docker0=[172.17.0.1/16] wlan0=[192.168.1.23/24 2001:db8:1::/64] " +
		"default4 via 192.168.1.1 dev wlan0 metric 600 default6 via fe80::1 dev wlan0 metric 600"
	if got != want {
		t.Fatalf("state of a laptop:\n got %s\nwant %s", got, want)
	}
}

// Only a difference in interfaces with a global address or in default
// routes is a change; the kernel's chatter is not.
func TestChangeFromRecordedMessages(t *testing.T) {
	wifiStats := make([]byte, 200) // struct rtnl_link_stats64, counters moved on
	wifiStats[0] = 42
	cases := []struct {
		name   string
		before [][]byte // applied after the laptop's dump, before the baseline
		events [][]byte
		change bool
	}{
		{name: "veth pair created without addresses", events: [][]byte{
			link(unix.RTM_NEWLINK, 10, unix.IFF_BROADCAST, "veth0"),
			link(unix.RTM_NEWLINK, 11, unix.IFF_BROADCAST, "veth1"),
			link(unix.RTM_NEWLINK, 10, up|unix.IFF_BROADCAST, "veth0"),
			link(unix.RTM_NEWLINK, 11, up|unix.IFF_BROADCAST, "veth1"),
			addr(unix.RTM_NEWADDR, 10, "fe80::a8c1:abff:fe00:1/64", unix.IFA_F_PERMANENT),
		}},
		{name: "container veth comes and goes", events: [][]byte{
			link(unix.RTM_NEWLINK, 12, unix.IFF_BROADCAST, "veth3f2a1b"),
			link(unix.RTM_NEWLINK, 12, up|unix.IFF_BROADCAST, "veth3f2a1b", rta(unix.IFLA_MASTER, u32(3))),
			link(unix.RTM_NEWLINK, 3, up|unix.IFF_BROADCAST, "docker0"), // bridge gains carrier
			addr(unix.RTM_NEWADDR, 12, "fe80::1/64", unix.IFA_F_PERMANENT),
			link(unix.RTM_NEWLINK, 3, unix.IFF_UP|unix.IFF_BROADCAST, "docker0"), // and loses it
			link(unix.RTM_DELLINK, 12, unix.IFF_BROADCAST, "veth3f2a1b"),
		}},
		{name: "Wi-Fi statistics update", events: [][]byte{
			link(unix.RTM_NEWLINK, 2, up|unix.IFF_BROADCAST|unix.IFF_MULTICAST, "wlan0",
				rta(unix.IFLA_STATS64, wifiStats), rta(unix.IFLA_WIRELESS, []byte{8, 0, 0x8b, 0x15, 0, 0, 0, 0})),
		}},
		{name: "IPv6 address refresh with new lifetimes", events: [][]byte{
			addr(unix.RTM_NEWADDR, 2, "2001:db8:1::23/64", unix.IFA_F_MANAGETEMPADDR, cacheinfo(14399, 86399)),
			addr(unix.RTM_NEWADDR, 2, "fe80::1c2:3/64", unix.IFA_F_PERMANENT),
		}},
		{name: "IPv6 temporary address rotated", events: [][]byte{
			addr(unix.RTM_NEWADDR, 2, "2001:db8:1::77aa:2/64", unix.IFA_F_TEMPORARY, cacheinfo(3600, 86400)),
			addr(unix.RTM_DELADDR, 2, "2001:db8:1::9e4f:1/64", unix.IFA_F_TEMPORARY),
		}},
		{name: "router advertisement refreshes the IPv6 default route", events: [][]byte{
			dflt(unix.RTM_NEWROUTE, 0, true, 2, "fe80::1", 600, rta(unix.RTA_EXPIRES, u32(1800))),
		}},
		{name: "default route deleted and added back in one burst", events: [][]byte{
			dflt(unix.RTM_DELROUTE, 0, false, 2, "192.168.1.1", 600),
			dflt(unix.RTM_NEWROUTE, unix.NLM_F_CREATE, false, 2, "192.168.1.1", 600),
		}},
		{name: "default route in another routing table (policy routing)", events: [][]byte{
			inTable(dflt(unix.RTM_NEWROUTE, 0, false, 2, "192.168.1.254", 0), 52),
		}},
		{name: "loopback gains a global address", events: [][]byte{
			addr(unix.RTM_NEWADDR, 1, "203.0.113.9/32", unix.IFA_F_PERMANENT),
		}},
		{name: "global address on an interface that is down", events: [][]byte{
			link(unix.RTM_NEWLINK, 13, unix.IFF_BROADCAST, "eth1"),
			addr(unix.RTM_NEWADDR, 13, "10.0.0.5/24", unix.IFA_F_PERMANENT),
		}},

		{name: "tunnel up with a global address", change: true, events: [][]byte{
			link(unix.RTM_NEWLINK, 20, unix.IFF_POINTOPOINT|unix.IFF_NOARP, "tun0"),
			link(unix.RTM_NEWLINK, 20, up|unix.IFF_POINTOPOINT|unix.IFF_NOARP, "tun0"),
			addr(unix.RTM_NEWADDR, 20, "100.64.0.5/32", unix.IFA_F_PERMANENT),
		}},
		{name: "wireguard interface up with an IPv6 address only", change: true, events: [][]byte{
			link(unix.RTM_NEWLINK, 21, up|unix.IFF_POINTOPOINT|unix.IFF_NOARP, "wg0"),
			addr(unix.RTM_NEWADDR, 21, "fd7a:115c:a1e0::5/128", unix.IFA_F_PERMANENT|unix.IFA_F_NODAD),
		}},
		{name: "down interface with an address comes up", change: true,
			before: [][]byte{
				link(unix.RTM_NEWLINK, 13, unix.IFF_BROADCAST, "eth1"),
				addr(unix.RTM_NEWADDR, 13, "10.0.0.5/24", unix.IFA_F_PERMANENT),
			},
			events: [][]byte{link(unix.RTM_NEWLINK, 13, up|unix.IFF_BROADCAST, "eth1")}},
		{name: "default route replaced with a new gateway", change: true, events: [][]byte{
			dflt(unix.RTM_NEWROUTE, unix.NLM_F_REPLACE, false, 2, "192.168.1.254", 600),
		}},
		{name: "default route moves to a tunnel", change: true,
			before: [][]byte{
				link(unix.RTM_NEWLINK, 20, up|unix.IFF_POINTOPOINT|unix.IFF_NOARP, "tun0"),
			},
			events: [][]byte{
				dflt(unix.RTM_DELROUTE, 0, false, 2, "192.168.1.1", 600),
				dflt(unix.RTM_NEWROUTE, unix.NLM_F_CREATE, false, 20, "", 50),
			}},
		{name: "a second default route appears", change: true, events: [][]byte{
			dflt(unix.RTM_NEWROUTE, unix.NLM_F_CREATE, false, 3, "172.17.0.254", 100),
		}},
		{name: "IPv4 address removed", change: true, events: [][]byte{
			addr(unix.RTM_DELADDR, 2, "192.168.1.23/24", 0),
		}},
		{name: "IPv6 global address removed", change: true, events: [][]byte{
			addr(unix.RTM_DELADDR, 2, "2001:db8:1::23/64", unix.IFA_F_MANAGETEMPADDR),
		}},
		{name: "IPv6 network renumbered", change: true, events: [][]byte{
			addr(unix.RTM_NEWADDR, 2, "2001:db8:2::23/64", unix.IFA_F_MANAGETEMPADDR),
			addr(unix.RTM_DELADDR, 2, "2001:db8:1::23/64", unix.IFA_F_MANAGETEMPADDR),
		}},
		{name: "a second IPv6 address in the same network", events: [][]byte{
			addr(unix.RTM_NEWADDR, 2, "2001:db8:1::1000/64", unix.IFA_F_PERMANENT),
		}},
		{name: "Wi-Fi joins a network", change: true,
			before: [][]byte{
				addr(unix.RTM_DELADDR, 2, "192.168.1.23/24", 0),
				addr(unix.RTM_DELADDR, 2, "2001:db8:1::23/64", 0),
				dflt(unix.RTM_DELROUTE, 0, false, 2, "192.168.1.1", 600),
				dflt(unix.RTM_DELROUTE, 0, true, 2, "fe80::1", 600),
			},
			events: [][]byte{
				addr(unix.RTM_NEWADDR, 2, "10.20.30.40/22", 0),
				dflt(unix.RTM_NEWROUTE, unix.NLM_F_CREATE, false, 2, "10.20.28.1", 600),
			}},
		{name: "Wi-Fi goes down", change: true, events: [][]byte{
			link(unix.RTM_NEWLINK, 2, unix.IFF_BROADCAST|unix.IFF_MULTICAST, "wlan0"),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := newTracker()
			feed(t, tr, laptop()...)
			feed(t, tr, c.before...)
			before := tr.state()
			feed(t, tr, c.events...)
			after := tr.state()
			if changed := !before.Equal(after); changed != c.change {
				t.Fatalf("change = %v, want %v\nbefore: %s\nafter:  %s", changed, c.change, describe(before), describe(after))
			}
		})
	}
}

// "ip route replace" sends only the new route: the old one must be gone
// from the state, or switching back later would look like no change.
func TestReplacedDefaultRouteIsGone(t *testing.T) {
	tr := newTracker()
	feed(t, tr, laptop()...)
	feed(t, tr, dflt(unix.RTM_NEWROUTE, unix.NLM_F_REPLACE, false, 2, "192.168.1.254", 600))
	var v4 []Route
	for _, r := range tr.state().DefaultRoutes {
		if !r.IPv6 {
			v4 = append(v4, r)
		}
	}
	want := []Route{{Interface: "wlan0", Gateway: netip.MustParseAddr("192.168.1.254"), Metric: 600}}
	if !slices.Equal(v4, want) {
		t.Fatalf("IPv4 default routes after a replace = %v, want %v", v4, want)
	}
}

// The kernel flushes the IPv4 routes of an interface that goes down
// without a message; coming back up, the route added again is a change.
func TestLinkDownForgetsItsRoutes(t *testing.T) {
	tr := newTracker()
	feed(t, tr, laptop()...)
	feed(t, tr, link(unix.RTM_NEWLINK, 2, unix.IFF_BROADCAST, "wlan0"))
	feed(t, tr, link(unix.RTM_NEWLINK, 2, up|unix.IFF_BROADCAST, "wlan0"))
	before := tr.state()
	if len(before.DefaultRoutes) != 0 {
		t.Fatalf("default routes kept through link down: %v", before.DefaultRoutes)
	}
	feed(t, tr, dflt(unix.RTM_NEWROUTE, unix.NLM_F_CREATE, false, 2, "192.168.1.1", 600))
	if before.Equal(tr.state()) {
		t.Fatal("the default route coming back is no change")
	}
}

// ECMP default routes list their next hops in RTA_MULTIPATH.
func TestMultipathDefaultRoute(t *testing.T) {
	nh := func(oif uint32, gw string) []byte {
		attrs := rta(unix.RTA_GATEWAY, ip(gw))
		b := binary.NativeEndian.AppendUint16(nil, uint16(unix.SizeofRtNexthop+len(attrs)))
		b = append(b, 0, 0)
		b = binary.NativeEndian.AppendUint32(b, oif)
		return append(b, attrs...)
	}
	msg := nlmsg(unix.RTM_NEWROUTE, unix.NLM_F_CREATE,
		unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Type: unix.RTN_UNICAST},
		rta(unix.RTA_MULTIPATH, append(nh(2, "192.168.1.1"), nh(3, "172.17.0.254")...)))
	tr := newTracker()
	feed(t, tr, laptop()[:3]...)
	feed(t, tr, msg)
	got := describe(tr.state())
	if want := "default4 via 172.17.0.254 dev docker0 metric 0 default4 via 192.168.1.1 dev wlan0 metric 0"; got != want {
		t.Fatalf("multipath state:\n got %s\nwant %s", got, want)
	}
}

// Whatever arrives on the socket, the tracker does not panic.
func FuzzTracker(f *testing.F) {
	for _, m := range laptop() {
		f.Add(m)
	}
	f.Add(dflt(unix.RTM_NEWROUTE, unix.NLM_F_REPLACE, true, 2, "fe80::1", 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := syscall.ParseNetlinkMessage(b)
		if err != nil {
			return
		}
		tr := newTracker()
		for _, m := range msgs {
			tr.apply(m)
		}
		_ = describe(tr.state())
	})
}
