// Package loopback says whether a host is this machine's loopback: the
// one test behind every trust decision that depends on it (a password
// sent over plain http, the status API's Host check and listen address,
// an OpenCode whose processes and files are this machine's). A name is
// never resolved: "localhost" (in any case, with or without the trailing
// dot of a fully qualified name) counts, any other name does not, since
// it could resolve anywhere.
package loopback

import (
	"net"
	"net/netip"
	"strings"
)

// Host reports whether host, with or without a port and IPv6 brackets,
// names the loopback: localhost, 127.0.0.0/8, ::1, or an IPv4 loopback
// mapped into IPv6.
func Host(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
