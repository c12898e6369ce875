package fake2_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"go.uber.org/goleak"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type rig struct {
	t    *testing.T
	fake *fake2.Server
	hc   *http.Client
}

func newRig(t *testing.T) *rig {
	fake := fake2.New(map[string]fake2.Spec{"a": {}})
	tr, stop := fake.Serve()
	t.Cleanup(stop)
	return &rig{t: t, fake: fake, hc: &http.Client{Transport: tr}}
}

func (r *rig) do(method, target string, auth bool, hdr map[string]string) (*http.Response, string) {
	r.t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), method, fake2.URL+target, nil)
	if auth {
		req.SetBasicAuth("opencode", fake2.DefaultPassword)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// The fake answers as 2.x does outside the model's routes, so a client
// that guesses wrong fails as it would against the real server.
func TestFakeSurface(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		resp, body := r.do("GET", "/api/mcp?location%5Bdirectory%5D=/p", false, nil)
		if resp.StatusCode != 401 || !strings.Contains(body, `"_tag":"UnauthorizedError"`) || resp.Header.Get("Www-Authenticate") != `Basic realm="Secure Area"` {
			t.Errorf("no auth: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		tok := base64.StdEncoding.EncodeToString([]byte("opencode:" + fake2.DefaultPassword))
		if resp, _ := r.do("GET", "/api/info?auth_token="+tok, false, nil); resp.StatusCode != 200 {
			t.Errorf("auth_token: %d", resp.StatusCode)
		}
		if resp, body := r.do("GET", "/global/health", false, nil); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || strings.Contains(body, "healthy") {
			t.Errorf("/global/health: %d %q", resp.StatusCode, body)
		}
		if resp, _ := r.do("GET", "/mcp?directory=/p", false, nil); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("1.x /mcp: %d", resp.StatusCode)
		}
		if resp, _ := r.do("POST", "/mcp/a/connect", false, nil); resp.StatusCode != 405 {
			t.Errorf("1.x connect: %d", resp.StatusCode)
		}
		if resp, _ := r.do("POST", "/tui/show-toast", false, nil); resp.StatusCode != 405 {
			t.Errorf("toast: %d", resp.StatusCode)
		}
		if resp, body := r.do("GET", "/api/nope", true, nil); resp.StatusCode != 404 || strings.Contains(body, "_tag") {
			t.Errorf("unknown /api: %d %q", resp.StatusCode, body)
		}
		if len(r.fake.Instances()) != 0 {
			t.Errorf("booted %v", r.fake.Instances())
		}

		// ?directory= is ignored: the request lands in the server's own
		// directory, and the fake records what the client sent.
		r.fake.ResetRequests()
		if resp, body := r.do("GET", "/api/mcp?directory=/p", true, nil); resp.StatusCode != 200 || !strings.Contains(body, `"directory":"`+fake2.DefaultHome+`"`) {
			t.Errorf("?directory=: %d %s", resp.StatusCode, body)
		}
		if got := r.fake.Requests(); len(got) != 1 || got[0].Directory != fake2.DefaultHome || got[0].LegacyDirectory != "/p" {
			t.Errorf("recorded %+v", got)
		}
		// The header is URL-decoded; the query wins over it.
		r.fake.ResetRequests()
		r.do("GET", "/api/mcp", true, map[string]string{"x-opencode-directory": "%2Ftmp%2Fa%20b%2B"})
		r.do("GET", "/api/config?location[directory]=/q", true, map[string]string{"x-opencode-directory": "/h"})
		got := r.fake.Requests()
		if len(got) != 2 || got[0].Directory != "/tmp/a b+" || !got[0].ViaHeader || got[1].Directory != "/q" || got[1].ViaHeader {
			t.Errorf("recorded %+v", got)
		}
	})
}

// The default profile answers as OpenCode 2.1.2 answered curl (the
// bodies below are its own, but for the pid): /api/info with its
// capabilities, a 401 with an UnauthorizedError body, empty 404s for
// routes its description lacks, 404 LocationNotFoundError for a directory
// that does not exist (booting nothing), a booting location's first read
// and connect finding no server yet, and a disposal announced by
// location.shutdown and then the status change of each server it stopped.
func TestFakeAnswersAs212(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.New(map[string]fake2.Spec{"echo": {}, "off": {Status: "disabled"}})
		tr, stop := fake.Serve()
		defer stop()
		r := &rig{t: t, fake: fake, hc: &http.Client{Transport: tr}}
		const loc = "?location%5Bdirectory%5D="

		if resp, body := r.do("GET", "/api/info", true, nil); resp.StatusCode != 200 ||
			body != `{"version":"2.1.2","pid":4194343,"urls":["http://127.0.0.1:49374"],"paths":{"tmp":"/tmp/opencode"},"capabilities":{"persistentPty":true}}` {
			t.Errorf("/api/info: %d %s", resp.StatusCode, body)
		}
		resp, body := r.do("GET", "/api/info", false, nil)
		if resp.StatusCode != 401 || body != `{"_tag":"UnauthorizedError","message":"Authentication required"}` ||
			resp.Header.Get("Www-Authenticate") != `Basic realm="Secure Area"` || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("no auth: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		for _, q := range []struct{ method, path string }{{"GET", "/api/health"}, {"GET", "/api/status"}, {"POST", "/api/mcp/echo/connect" + loc + "/p"}} {
			if resp, body := r.do(q.method, q.path, true, nil); resp.StatusCode != 404 || body != "" {
				t.Errorf("%s %s: %d %q, want an empty 404", q.method, q.path, resp.StatusCode, body)
			}
		}
		fake.SetMissingDirectory("/nonexistent/x")
		if resp, body := r.do("GET", "/api/mcp"+loc+"/nonexistent/x", true, nil); resp.StatusCode != 404 ||
			body != `{"_tag":"LocationNotFoundError","location":{"directory":"/nonexistent/x"},"message":"Location not found: /nonexistent/x"}` {
			t.Errorf("a directory that does not exist: %d %s", resp.StatusCode, body)
		}
		if got := fake.Instances(); len(got) != 0 {
			t.Errorf("booted %v", got)
		}

		// The read that boots a location lists nothing; the next one
		// lists its servers. A connect in a location it boots finds no
		// server.
		if _, body := r.do("GET", "/api/mcp"+loc+"/p", true, nil); body != `{"location":{"directory":"/p"},"data":[]}` {
			t.Errorf("first read: %s", body)
		}
		if _, body := r.do("GET", "/api/mcp"+loc+"/p", true, nil); body != `{"location":{"directory":"/p"},"data":[{"name":"echo","status":{"status":"connected"}},{"name":"off","status":{"status":"disabled"}}]}` {
			t.Errorf("second read: %s", body)
		}
		if resp, body := r.do("POST", "/api/experimental/mcp/echo/connect"+loc+"/q", true, nil); resp.StatusCode != 404 ||
			body != `{"_tag":"McpServerNotFoundError","server":"echo","message":"MCP server not found: echo"}` {
			t.Errorf("connect in a booting location: %d %s", resp.StatusCode, body)
		}
		if resp, _ := r.do("POST", "/api/experimental/mcp/echo/connect"+loc+"/q", true, nil); resp.StatusCode != 204 {
			t.Errorf("connect once booted: %d", resp.StatusCode)
		}
		if _, body := r.do("GET", "/api/debug/location", true, nil); body != `[{"directory":"/p"},{"directory":"/q"}]` {
			t.Errorf("booted locations: %s", body)
		}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", fake2.URL+"/api/event", nil)
		req.SetBasicAuth("opencode", fake2.DefaultPassword)
		resp, err := r.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var mu sync.Mutex
		var stream []byte
		read := make(chan struct{})
		go func() {
			defer close(read)
			buf := make([]byte, 4096)
			for {
				n, err := resp.Body.Read(buf)
				mu.Lock()
				stream = append(stream, buf[:n]...)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		synctest.Wait()
		if resp, _ := r.do("DELETE", "/api/debug/location"+loc+"/q", true, nil); resp.StatusCode != 204 {
			t.Errorf("evict: %d", resp.StatusCode)
		}
		synctest.Wait()
		mu.Lock()
		got := string(stream)
		mu.Unlock()
		cancel()
		<-read
		if !strings.Contains(got, `"type":"server.connected","data":{}}`+"\n\n: heartbeat\n\n") {
			t.Errorf("stream start: %q", got)
		}
		shutdown, changed := strings.Index(got, `"type":"location.shutdown","location":{"directory":"/q"}`), strings.Index(got, `"type":"mcp.status.changed","location":{"directory":"/q"},"data":{"server":"echo"}`)
		if shutdown < 0 || changed < shutdown || strings.Contains(got, `"server":"off"`) {
			t.Errorf("the eviction of /q: %q, want location.shutdown, then mcp.status.changed of echo only (off was disabled)", got)
		}
	})
}

// A connect is stop + start: pending while it runs, 204 when it is over,
// and a shutdown evicts the location.
func TestFakeConnectAndShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.fake.SetDirConfig("/p", map[string]fake2.Spec{"s": {Status: "failed", Error: "boom", AfterConnect: "connected", ConnectDelay: 2 * time.Second}})
		r.fake.Boot("/p")
		_, body := r.do("GET", "/api/mcp?location%5Bdirectory%5D=%2Fp", true, nil)
		if !strings.Contains(body, `{"name":"s","status":{"status":"failed","error":"boom"}}`) {
			t.Fatalf("status %s", body)
		}
		done := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(done)
			if resp, _ := r.do("POST", "/api/experimental/mcp/s/connect?location%5Bdirectory%5D=%2Fp", true, nil); resp.StatusCode != 204 || time.Since(start) != 2*time.Second {
				t.Errorf("connect: %d after %v", resp.StatusCode, time.Since(start))
			}
		}()
		time.Sleep(time.Second)
		if _, body := r.do("GET", "/api/mcp?location%5Bdirectory%5D=%2Fp", true, nil); !strings.Contains(body, `"status":"pending"`) {
			t.Errorf("during connect: %s", body)
		}
		<-done
		if _, body := r.do("GET", "/api/mcp?location%5Bdirectory%5D=%2Fp", true, nil); !strings.Contains(body, `{"name":"s","status":{"status":"connected"}}`) {
			t.Errorf("after connect: %s", body)
		}
		if resp, body := r.do("POST", "/api/experimental/mcp/x/connect?location%5Bdirectory%5D=%2Fp", true, nil); resp.StatusCode != 404 || !strings.Contains(body, "McpServerNotFoundError") {
			t.Errorf("unknown: %d %s", resp.StatusCode, body)
		}
		r.fake.Shutdown("/p")
		if len(r.fake.Instances()) != 0 {
			t.Errorf("after shutdown: %v", r.fake.Instances())
		}
		// A shutdown during a pending connect ends it.
		r.fake.SetPending(time.Hour)
		r.fake.Boot("/q")
		done = make(chan struct{})
		start = time.Now()
		go func() {
			defer close(done)
			r.do("POST", "/api/experimental/mcp/a/connect?location%5Bdirectory%5D=%2Fq", true, nil)
		}()
		time.Sleep(time.Second)
		r.fake.Shutdown("/q")
		<-done
		if d := time.Since(start); d != time.Second {
			t.Errorf("connect across shutdown returned after %v", d)
		}
	})
}

// The knobs the engine's tests share with the 1.x fake: ConnectNotFound,
// CrashAfter and Starts, FailConfig, Reload; and the raw query is recorded.
func TestFakeTestKnobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.fake.SetDirConfig("/p", map[string]fake2.Spec{
			"ghost": {Status: "failed", ConnectNotFound: true},
			"loop":  {Status: "failed", AfterConnect: "connected", CrashAfter: 2 * time.Second},
		})
		if resp, body := r.do("POST", "/api/experimental/mcp/ghost/connect?location%5Bdirectory%5D=%2Fp", true, nil); resp.StatusCode != 404 || !strings.Contains(body, `"_tag":"McpServerNotFoundError"`) {
			t.Errorf("ConnectNotFound: %d %s", resp.StatusCode, body)
		}
		if _, body := r.do("GET", "/api/mcp?location%5Bdirectory%5D=%2Fp", true, nil); !strings.Contains(body, `"name":"ghost"`) {
			t.Errorf("ghost not listed: %s", body)
		}
		if resp, _ := r.do("POST", "/api/experimental/mcp/loop/connect?location%5Bdirectory%5D=%2Fp", true, nil); resp.StatusCode != 204 {
			t.Errorf("connect: %d", resp.StatusCode)
		}
		if n := r.fake.Starts("/p", "loop"); n != 1 {
			t.Errorf("starts = %d, want 1", n)
		}
		time.Sleep(1999 * time.Millisecond)
		if _, body := r.do("GET", "/api/mcp?location%5Bdirectory%5D=%2Fp", true, nil); !strings.Contains(body, `{"name":"loop","status":{"status":"connected"}}`) {
			t.Errorf("before the crash: %s", body)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait() // the crash timer's goroutine has run
		if _, body := r.do("GET", "/api/mcp?location%5Bdirectory%5D=%2Fp", true, nil); !strings.Contains(body, `{"name":"loop","status":{"status":"failed","error":"Connection closed"}}`) {
			t.Errorf("after the crash: %s", body)
		}
		r.fake.FailConfig(1)
		if resp, _ := r.do("GET", "/api/config?location%5Bdirectory%5D=%2Fq", true, nil); resp.StatusCode != 500 {
			t.Errorf("failed config: %d", resp.StatusCode)
		}
		if got := r.fake.Instances(); len(got) != 1 || got[0] != "/p" {
			t.Errorf("a failed config read booted: %v", got)
		}
		if resp, _ := r.do("GET", "/api/config?location%5Bdirectory%5D=%2Fq", true, nil); resp.StatusCode != 200 {
			t.Errorf("config after the failure: %d", resp.StatusCode)
		}
		reqs := r.fake.Requests()
		if q := reqs[len(reqs)-1].RawQuery; q != "location%5Bdirectory%5D=%2Fq" {
			t.Errorf("raw query = %q", q)
		}
		r.fake.Reload()
		if got := r.fake.Instances(); len(got) != 0 {
			t.Errorf("after reload: %v", got)
		}
	})
}

// Each profile's GET /openapi.json is the real server's answer, byte for
// byte: the file recorded from it (testdata), not a copy that could drift,
// and the file is the recording (its SHA-256, taken when it was recorded
// from the npm release).
func TestDescriptionsAreTheRecordedOnes(t *testing.T) {
	for _, c := range []struct {
		fake *fake2.Server
		file string
		sum  string
	}{
		{fake2.New(nil), "testdata/opencode-2.1.2-openapi.json", "b99ddb33ba96f6a5bfba762ba777987c1339e09c881bbc76d4deefeb74ee5449"},
	} {
		t.Run(c.fake.Profile().Name, func(t *testing.T) {
			want, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(want); hex.EncodeToString(sum[:]) != c.sum {
				t.Fatalf("%s has SHA-256 %x, the recording's is %s", c.file, sum, c.sum)
			}
			srv := httptest.NewServer(c.fake)
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL+"/openapi.json", nil)
			req.SetBasicAuth("opencode", fake2.DefaultPassword)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
				t.Errorf("GET /openapi.json: %d, %d bytes; the recorded answer is 200, %d bytes", resp.StatusCode, len(got), len(want))
			}
		})
	}
}
