package netwatch

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// State is the part of the machine's network that decides whether a remote
// MCP server can be reached: which interfaces can carry traffic beyond the
// machine, and where the default routes lead. Everything else (link
// statistics, address lifetimes, interfaces without a global address such
// as the host side of a container's veth) is left out, so that only a
// difference between two States is a network change.
type State struct {
	// Interfaces maps the name of each interface that is up, is not
	// loopback and has at least one global unicast address (private and
	// ULA addresses included, link-local excluded) to those addresses,
	// sorted: IPv4 addresses as they are, IPv6 ones as the network they
	// are in (2001:db8:1::/64), because an IPv6 host makes new temporary
	// addresses in the same network every day.
	Interfaces map[string][]netip.Prefix
	// DefaultRoutes are the IPv4 and IPv6 routes that take traffic to
	// the world, sorted: the default routes, and also those a VPN takes
	// the world with (a route to a large part of the address space, a
	// default route in a table of its own: wayOut).
	DefaultRoutes []Route
}

// Route is one default route.
type Route struct {
	// IPv6 tells an IPv6 default route from an IPv4 one.
	IPv6 bool
	// Interface is the name of the interface the route leaves by.
	Interface string
	// Gateway is the next hop; the zero Addr for a route straight out of
	// a point-to-point interface (a VPN tunnel).
	Gateway netip.Addr
	// Metric orders routes of one family; the lowest wins.
	Metric uint32
}

// Equal reports whether s and o are the same network: the test for a change.
func (s State) Equal(o State) bool {
	return maps.EqualFunc(s.Interfaces, o.Interfaces, slices.Equal) &&
		slices.Equal(s.DefaultRoutes, o.DefaultRoutes)
}

// Uplink reports whether going from was to is moved the way out of the
// machine, the change that can kill connections held across it: a
// default route came, went or moved (another interface, gateway or
// metric: a VPN taking over, Wi-Fi joining another network), or an
// interface a default route of was leaves by lost an address (a
// connection's source address gone). Any other change (a container
// bridge, a libvirt network or a veth coming or going beside an
// unchanged default route, an address added) leaves held connections
// working: it may make an unreachable server reachable, nothing more.
func Uplink(was, is State) bool {
	if !slices.Equal(was.DefaultRoutes, is.DefaultRoutes) {
		return true
	}
	for _, r := range was.DefaultRoutes {
		for _, p := range was.Interfaces[r.Interface] {
			if !slices.Contains(is.Interfaces[r.Interface], p) {
				return true
			}
		}
	}
	return false
}

// normalize sorts what s holds, so that Equal compares sets.
func (s *State) normalize() {
	if s.Interfaces == nil {
		s.Interfaces = map[string][]netip.Prefix{}
	}
	for name, ps := range s.Interfaces {
		for i, p := range ps {
			if p.Addr().Is6() {
				ps[i] = p.Masked()
			}
		}
		slices.SortFunc(ps, func(a, b netip.Prefix) int {
			return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
		})
		s.Interfaces[name] = slices.Compact(ps)
	}
	slices.SortFunc(s.DefaultRoutes, func(a, b Route) int {
		return cmp.Or(cmp.Compare(b2i(a.IPv6), b2i(b.IPv6)), cmp.Compare(a.Metric, b.Metric),
			strings.Compare(a.Interface, b.Interface), a.Gateway.Compare(b.Gateway))
	})
	s.DefaultRoutes = slices.Compact(s.DefaultRoutes)
}

// counts reports whether an address on a counted interface makes it count:
// only global unicast addresses reach beyond the machine.
func counts(a netip.Addr) bool {
	return a.IsValid() && a.Unmap().IsGlobalUnicast()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
