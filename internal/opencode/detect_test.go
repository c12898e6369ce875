package opencode_test

import (
	"context"
	"errors"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestDetectFakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f2 := fake2.New(map[string]fake2.Spec{"a": {}})
		tr2, stop2 := f2.Serve()
		defer stop2()
		gen, v, pid, err := opencode.Detect(context.Background(), fake2.URL, opencode.Options{Transport: tr2, Password: fake2.DefaultPassword})
		if err != nil || gen != opencode.V2 || v != fake2.DefaultVersion || pid != fake2.DefaultPID {
			t.Errorf("2.x fake: %v %q %d %v", gen, v, pid, err)
		}
		// A wrong password is recognised as 2.x's refusal.
		gen, _, _, err = opencode.Detect(context.Background(), fake2.URL, opencode.Options{Transport: tr2, Password: "wrong"})
		if gen != opencode.V2 || !errors.Is(err, opencode.ErrUnauthorized) || !strings.Contains(err.Error(), "OpenCode 2 refused the password") ||
			!strings.Contains(err.Error(), "OPENCODE_PASSWORD") || strings.Contains(err.Error(), "--username") || strings.Contains(err.Error(), "wrong") {
			t.Errorf("2.x fake, wrong password: %v, %v", gen, err)
		}
		if len(f2.Instances()) != 0 {
			t.Errorf("detection booted %v", f2.Instances())
		}

		f1 := fakeopencode.New(nil)
		tr1, stop1 := f1.Serve()
		defer stop1()
		gen, v, _, err = opencode.Detect(context.Background(), fakeopencode.URL, opencode.Options{Transport: tr1})
		if err != nil || gen != opencode.V1 || v != "1.18.34" {
			t.Errorf("1.x fake: %v %q %v", gen, v, err)
		}
		// 1.x with a wrong password cannot tell its version; the error
		// says the credentials were refused.
		f1.Password = "right"
		gen, _, _, err = opencode.Detect(context.Background(), fakeopencode.URL, opencode.Options{Transport: tr1, Password: "wrong"})
		if gen != opencode.GenUnknown || !errors.Is(err, opencode.ErrUnauthorized) {
			t.Errorf("1.x fake, wrong password: %v, %v", gen, err)
		}
	})
}

func detectAgainst(t *testing.T, routes map[string]func(w http.ResponseWriter)) (opencode.Generation, string, int, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := routes[r.URL.Path]; h != nil {
			h(w)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><html></html>"))
	}))
	defer srv.Close()
	return opencode.Detect(context.Background(), srv.URL, opencode.Options{Password: "pw"})
}

func answer(code int, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

func TestDetectNeverTrustsAStatusCode(t *testing.T) {
	// A 200 HTML to everything (2.x's web UI, a proxy): not OpenCode.
	gen, _, _, err := detectAgainst(t, nil)
	if gen != opencode.GenUnknown || !errors.Is(err, opencode.ErrUnavailable) || !strings.Contains(err.Error(), "/api/info answered 200") {
		t.Errorf("html everywhere: %v %v", gen, err)
	}
	for name, routes := range map[string]map[string]func(http.ResponseWriter){
		"info of 1.x":        {"/api/info": answer(200, `{"version":"1.18.34","pid":1}`)},
		"info without pid":   {"/api/info": answer(200, `{"version":"2.0.21"}`)},
		"info with text pid": {"/api/info": answer(200, `{"version":"2.0.21","pid":"12"}`)},
		"untagged 401":       {"/api/info": answer(401, `Unauthorized`)},
		"unhealthy garbage":  {"/global/health": answer(200, `{"healthy":"yes","version":"1.0"}`)},
		"health of 2.x":      {"/global/health": answer(200, `{"healthy":true,"version":"2.0.21"}`)},
		"status of 1.x":      {"/api/status": answer(200, `{"version":"1.18.34"}`)},
		"500s":               {"/api/info": answer(500, `{"version":"2.0.21","pid":1}`), "/global/health": answer(500, ""), "/api/status": answer(500, "")},
	} {
		if gen, v, _, err := detectAgainst(t, routes); gen != opencode.GenUnknown || err == nil {
			t.Errorf("%s: %v %q %v, want unknown and an error", name, gen, v, err)
		}
	}
	// An unhealthy 1.x is 1.x, not ready.
	gen, _, _, err = detectAgainst(t, map[string]func(http.ResponseWriter){"/global/health": answer(200, `{"healthy":false,"version":"1.18.34"}`)})
	if gen != opencode.V1 || !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("unhealthy 1.x: %v %v", gen, err)
	}
}

func TestDetectUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	gen, _, _, err := opencode.Detect(context.Background(), "http://"+addr, opencode.Options{})
	if gen != opencode.GenUnknown || !errors.Is(err, opencode.ErrUnavailable) {
		t.Errorf("nothing listening: %v %v", gen, err)
	}
	if _, _, _, err := opencode.Detect(context.Background(), "not a url", opencode.Options{}); err == nil {
		t.Error("bad url accepted")
	}
}

// Each probe gives up after DetectTimeout; a hung server is not probed
// further.
func TestDetectTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fakeopencode.NewPipeListener()
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })}
		done := make(chan struct{})
		go func() { defer close(done); _ = hs.Serve(l) }()
		tr := &http.Transport{DialContext: l.Dial}
		start := time.Now()
		_, _, _, err := opencode.Detect(context.Background(), fakeopencode.URL, opencode.Options{Transport: tr})
		if !errors.Is(err, opencode.ErrUnavailable) || time.Since(start) != opencode.DetectTimeout {
			t.Errorf("err %v after %v, want a timeout after %v", err, time.Since(start), opencode.DetectTimeout)
		}
		tr.CloseIdleConnections()
		_ = hs.Close()
		<-done
	})
}

// emptyRefusal is the 401 of OpenCode 1.18.34's Hono routes: no body,
// only www-authenticate.
func emptyRefusal(w http.ResponseWriter) {
	w.Header().Set("Www-Authenticate", `Basic realm="Secure Area"`)
	w.WriteHeader(http.StatusUnauthorized)
}

// A local-channel build's /api/info reports a version that is no
// release's: OpenCode 2 all the same (only a 1.x version is refused); and
// an /api/health alone is no OpenCode this daemon knows.
func TestDetectOddVersions(t *testing.T) {
	gen, v, _, err := detectAgainst(t, map[string]func(http.ResponseWriter){"/api/info": answer(200, `{"version":"local","pid":5}`)})
	if err != nil || gen != opencode.V2 || v != "local" {
		t.Errorf("local build: %v %q %v", gen, v, err)
	}
	if gen, v, _, err := detectAgainst(t, map[string]func(http.ResponseWriter){"/api/health": answer(200, `{"healthy":true,"version":"2.0.0","pid":3}`)}); gen != opencode.GenUnknown || err == nil {
		t.Errorf("an /api/health alone: %v %q %v, want unknown and an error", gen, v, err)
	}
}

// A wrong password is told apart by the refusal's shape (both answers
// seen on the wire: 1.18.34 and 2.1.2 with the real binaries). The 2.x error says how to give 2.x its password, not
// 1.x's --username.
func TestDetectRefusalShapes(t *testing.T) {
	tagged := answer(401, `{"_tag":"UnauthorizedError","message":"Authentication required"}`)
	for name, c := range map[string]struct {
		routes map[string]func(http.ResponseWriter)
		gen    opencode.Generation
	}{
		// 1.18.34: empty refusals, a tagged one at /api/health.
		"1.18.34": {map[string]func(http.ResponseWriter){"/api/info": emptyRefusal, "/global/health": emptyRefusal, "/api/health": tagged, "/api/status": emptyRefusal}, opencode.GenUnknown},
		// 2.1.2 tags its refusal at /api/info.
		"2.1.2": {map[string]func(http.ResponseWriter){"/api/info": tagged}, opencode.V2},
	} {
		gen, _, _, err := detectAgainst(t, c.routes)
		if gen != c.gen || !errors.Is(err, opencode.ErrUnauthorized) {
			t.Errorf("%s: %v %v, want %v and ErrUnauthorized", name, gen, err, c.gen)
			continue
		}
		v2hint := strings.Contains(err.Error(), "OPENCODE_PASSWORD") && strings.Contains(err.Error(), "service.json")
		v1hint := strings.Contains(err.Error(), "--username")
		if c.gen == opencode.V2 && (!v2hint || v1hint) || c.gen != opencode.V2 && !v1hint {
			t.Errorf("%s: %v: the wrong fix", name, err)
		}
	}
}

// The one reading of a version's line, for detection and run alike.
func TestMajorOfAVersion(t *testing.T) {
	for v, want := range map[string]int{"1.18.34": 1, "2.0.21": 2, "v2.0.21": 2,
		"0.3.1": 0, "1": 1, "": -1, "x.1": -1, "-1.0.0": -1, "+1.0": -1} {
		if got := opencode.Major(v); got != want {
			t.Errorf("Major(%q) = %d, want %d", v, got, want)
		}
	}
}

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
