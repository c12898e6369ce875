package opencode_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
)

// An OpenCode URL with the wrong port is said in the user's terms: when
// nothing listens, the address, not the 2.x route asked first (a 1.x
// user never heard of it); when something else answers, what was asked
// of it as OpenCode 1.x and as 2.x, and what it answered. The errors keep
// their kind.
func TestDetectErrorsNameWhatWasTriedInTheUsersTerms(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, _, _, err = opencode.Detect(context.Background(), "http://"+addr, opencode.Options{})
	if want := "opencode at http://" + addr + ": connection refused: nothing listens on " + addr; err == nil || err.Error() != want {
		t.Errorf("nothing listening:\n got %v\nwant %s", err, want)
	}
	if !errors.Is(err, opencode.ErrRefused) || !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("nothing listening: %v is not ErrRefused and ErrUnavailable", err)
	}

	gen, _, _, err := detectAgainst(t, map[string]func(http.ResponseWriter){
		"/api/info": answer(404, ""), "/global/health": answer(404, "")})
	want := "it answers, but not (yet) as an OpenCode this daemon knows: asked as OpenCode 1.x (GET /global/health answered 404) and as 2.x (GET /api/info answered 404)"
	if gen != opencode.GenUnknown || err == nil || !strings.HasSuffix(err.Error(), ": "+want) || strings.Contains(err.Error(), "detect:") || !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("another HTTP server:\n got %v\nwant …: %s", err, want)
	}
}

// A server that accepts the connection but does not answer is said so,
// with how long it was given; an https URL of a plain-http server keeps
// what the client said of it.
func TestDetectSilenceAndSchemeInTheUsersTerms(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	_, _, _, err = opencode.Detect(context.Background(), "http://"+l.Addr().String(), opencode.Options{Timeout: 200 * time.Millisecond})
	if want := "opencode at http://" + l.Addr().String() + ": no answer within 200ms"; err == nil || err.Error() != want || !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("a silent server:\n got %v\nwant %s", err, want)
	}

	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "https://", 1)
	_, _, _, err = opencode.Detect(context.Background(), u, opencode.Options{})
	if want := "opencode at " + u + ": http: server gave HTTP response to HTTPS client"; err == nil || err.Error() != want {
		t.Errorf("https to a plain-http server:\n got %v\nwant %s", err, want)
	}
}
