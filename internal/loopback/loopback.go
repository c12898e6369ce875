// Package loopback is this machine's loopback: whether a host names it,
// the one test behind every trust decision that depends on it (a password
// sent over plain http, the status API's Host check and listen address,
// an OpenCode whose processes and files are this machine's). A name is
// never resolved: "localhost" (in any case, with or without the trailing
// dot of a fully qualified name) counts, any other name does not, since
// it could resolve anywhere. FreePort picks a port on it, for an
// OpenCode started here.
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

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
