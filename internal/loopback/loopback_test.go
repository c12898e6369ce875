package loopback

import "testing"

// The copies this replaced disagreed: two compared "localhost" case-
// sensitively, one took "LOCALHOST" for loopback, none knew the mapped
// form. This is the answer for all.
func TestHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost": true, "localhost.": true, "localhost:4096": true, "LOCALHOST:4096": true,
		"127.0.0.1": true, "127.1.2.3:80": true, "[::1]:4096": true, "::1": true, "::ffff:127.0.0.1": true, "[::ffff:127.0.0.1]:1": true,
		"": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "example.com": false, "localhost.example.com": false,
		"127.0.0.1.nip.io": false, "[::2]": false, "evil.localhost": false,
	} {
		if got := Host(host); got != want {
			t.Errorf("Host(%q) = %v, want %v", host, got, want)
		}
	}
}

func FuzzHost(f *testing.F) {
	f.Add("localhost:4096")
	f.Fuzz(func(t *testing.T, s string) { _ = Host(s) })
}
