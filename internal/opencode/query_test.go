package opencode

import (
	"net/url"
	"testing"
)

// The query of a read is the one url.Values would encode, byte for byte,
// for every directory name: spaces, unicode, slashes, '+', '&', '#', '%',
// a NUL, invalid UTF-8; 2.x's bracketed key escaped as before.
func TestQueriesAreEncodedAsURLValuesEncodesThem(t *testing.T) {
	for _, dir := range []string{"/p/my project", "/p/ünï cødé/日本", "/p/a+b&c=d#e%f?g", "/p/\x00nul", "/p/\xff\xfe", "/p/a/b/", ""} {
		if got, want := dirQuery(dir), (url.Values{"directory": {dir}}).Encode(); got != want {
			t.Errorf("dirQuery(%q) = %q, want %q", dir, got, want)
		}
		if got, want := locQuery(dir), (url.Values{locationParam: {dir}}).Encode(); got != want {
			t.Errorf("locQuery(%q) = %q, want %q", dir, got, want)
		}
	}
}
