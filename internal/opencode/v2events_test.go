package opencode_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
	"github.com/mcp-reconnect/mcp-reconnect/internal/sse"
)

// Frames of 2.x /api/event as docs/opencode.md#the-event-stream-2x describes them.
const (
	frameConnected = `{"id":"evt_0ab3","type":"server.connected","data":{}}`
	frameStatus    = `{"id":"evt_1","created":1790913415940,"type":"mcp.status.changed","location":{"directory":"/Users/me/p"},"data":{"server":"docs"}}`
	frameShutdown  = `{"id":"evt_2","created":1790913415941,"type":"location.shutdown","location":{"directory":"/Users/me/p"},"data":{}}`
	frameStarted   = `{"id":"evt_3","created":1790913415942,"type":"session.execution.started","location":{"directory":"/Users/me/p"},"data":{"sessionID":"ses_1"},"durable":{"aggregateID":"ses_1","seq":3,"version":1}}`
)

// parseV2 is the 2.x stream's parser on a stream that has seen no session.
func parseV2(data []byte) (opencode.Event, error) { return opencode.NewSessionMemoryForTest(8)(data) }

func TestParseEventV2(t *testing.T) {
	cases := []struct {
		frame string
		want  opencode.Event
	}{
		{frameConnected, opencode.Event{Kind: opencode.KindOther, Type: "server.connected"}},
		// A wake-up, never a crash report.
		{frameStatus, opencode.Event{Kind: opencode.KindServerChanged, Type: "mcp.status.changed", Directory: "/Users/me/p", Server: "docs"}},
		{frameShutdown, opencode.Event{Kind: opencode.KindInstanceGone, Type: "location.shutdown", Directory: "/Users/me/p"}},
		{frameStarted, opencode.Event{Kind: opencode.KindActivity, Type: "session.execution.started", Directory: "/Users/me/p"}},
		// A shutdown without a location names nothing to forget.
		{`{"type":"location.shutdown","data":{}}`, opencode.Event{Kind: opencode.KindOther, Type: "location.shutdown"}},
		// Odd shapes cost only themselves.
		{`{"type":"mcp.status.changed","location":{"directory":7},"data":{"server":["x"]}}`, opencode.Event{Kind: opencode.KindServerChanged, Type: "mcp.status.changed"}},
		{`{"type":"mcp.status.changed","location":"x","data":"y"}`, opencode.Event{Kind: opencode.KindServerChanged, Type: "mcp.status.changed"}},
		// 1.x's name is not on 2.x's stream, and means nothing there.
		{`{"type":"mcp.tools.changed","location":{"directory":"/p"},"data":{"server":"a"}}`, opencode.Event{Kind: opencode.KindOther, Type: "mcp.tools.changed", Directory: "/p"}},
	}
	for _, typ := range []string{"session.execution.succeeded", "session.execution.failed", "session.execution.interrupted",
		"session.step.started", "session.text.delta", "session.inbox.added", "session.created", "session.status"} {
		cases = append(cases, struct {
			frame string
			want  opencode.Event
		}{`{"id":"e","type":"` + typ + `","location":{"directory":"/d"},"data":{"error":{"type":"x","message":"m"}}}`,
			opencode.Event{Kind: opencode.KindActivity, Type: typ, Directory: "/d"}})
	}
	for _, typ := range []string{"rpc.plugin.call", "mcp.resources.changed", "tui.toast.show", "server.heartbeat", "sessions", "global.disposed"} {
		cases = append(cases, struct {
			frame string
			want  opencode.Event
		}{`{"type":"` + typ + `","location":{"directory":"/d"},"data":{}}`, opencode.Event{Kind: opencode.KindOther, Type: typ, Directory: "/d"}})
	}
	for _, c := range cases {
		ev, err := parseV2([]byte(c.frame))
		if err != nil || ev != c.want {
			t.Errorf("parse(%s) = %+v, %v; want %+v", c.frame, ev, err, c.want)
		}
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"type":""}`, `{"type":3}`, `nope`, `null`,
		`{"directory":"/p","payload":{"type":"mcp.tools.changed","properties":{"server":"s"}}}`} {
		if ev, err := parseV2([]byte(bad)); err == nil {
			t.Errorf("parse(%q) = %+v, nil error", bad, ev)
		}
	}
}

// The fake's stream carries 2.x's envelope: server.connected first, the
// boot burst of mcp.status.changed, heartbeat comments (which the SSE
// reader skips), location.shutdown.
func TestFake2StreamDecodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, c := v2Rig(t, map[string]fake2.Spec{"a": {}, "b": {Status: "failed", Error: "boom"}})
		fake.SetPending(time.Second)
		tr, stop := fake.Serve()
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", fake2.URL+"/api/event", nil)
		req.SetBasicAuth("opencode", fake2.DefaultPassword)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// A reader drains the stream all the time, as the daemon does
		// (a pipe holds no bytes: an idle reader would block the writer).
		var raw strings.Builder
		frames := make(chan []byte, 64)
		go func() {
			defer close(frames)
			r := sse.NewReader(bufio.NewReader(readTee{resp.Body, &raw}))
			for {
				f, err := r.Next()
				if err != nil {
					return
				}
				frames <- f.Data
			}
		}()
		parse := opencode.NewSessionMemoryForTest(8)
		next := func() opencode.Event {
			t.Helper()
			data, ok := <-frames
			if !ok {
				t.Fatal("stream ended")
			}
			ev, err := parse(data)
			if err != nil {
				t.Fatalf("frame %s: %v", data, err)
			}
			return ev
		}
		if ev := next(); ev.Type != "server.connected" {
			t.Fatalf("first event %+v", ev)
		}
		if _, err := c.MCPStatus(ctx, "/p"); err != nil {
			t.Fatal(err)
		}
		// Boot: a, b pending; a second later, their outcomes.
		var got []string
		for range 4 {
			ev := next()
			if ev.Kind != opencode.KindServerChanged || ev.Directory != "/p" {
				t.Fatalf("boot burst: %+v", ev)
			}
			got = append(got, ev.Server)
		}
		slices.Sort(got[2:]) // outcomes settle at the same instant, in any order
		if strings.Join(got, " ") != "a b a b" {
			t.Errorf("boot burst servers = %q", got)
		}
		time.Sleep(40 * time.Second) // two heartbeat periods
		fake.Shutdown("/p")
		if ev := next(); ev.Kind != opencode.KindInstanceGone || ev.Directory != "/p" {
			t.Errorf("shutdown: %+v", ev)
		}
		cancel()
		for range frames {
		}
		if n := strings.Count(raw.String(), ": heartbeat\n\n"); n != 3 { // one right after server.connected
			t.Errorf("%d heartbeat comments in %q", n, raw.String())
		}
		if len(fake.Instances()) != 0 {
			t.Errorf("instances after shutdown: %v", fake.Instances())
		}
		cancel()
	})
}

type readTee struct {
	r interface{ Read([]byte) (int, error) }
	w *strings.Builder
}

func (t readTee) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.w.Write(p[:n])
	return n, err
}

func FuzzParseEventV2(f *testing.F) {
	for _, s := range []string{frameConnected, frameStatus, frameShutdown, frameStarted,
		`{"type":"mcp.status.changed","location":"x","data":"y"}`, `{"type":3}`,
		`{"directory":"/p","payload":{"type":"mcp.tools.changed","properties":{}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := parseV2(b)
		if err != nil {
			return
		}
		if ev.Type == "" {
			t.Fatal("accepted an event without a type")
		}
		if ev.Kind == opencode.KindInstanceGone && ev.Directory == "" {
			t.Fatal("instance gone without a directory")
		}
		if ev.Kind == opencode.KindServerFailed || ev.Kind == opencode.KindAllGone {
			t.Fatalf("2.x event read as %v", ev.Kind)
		}
	})
}

// The head of a 2.x event too large to keep still says where a client is
// busy: type and location come before the data.
func TestParseEventV2Head(t *testing.T) {
	big := `{"id":"evt_1","created":1,"type":"session.step.finished","location":{"directory":"/p q"},"data":{"output":"` + strings.Repeat("x", 100)
	ev, err := opencode.ParseEventV2Head([]byte(big))
	if err != nil || ev.Kind != opencode.KindActivity || ev.Directory != "/p q" || ev.Type != "session.step.finished" {
		t.Fatalf("head = %+v, %v", ev, err)
	}
	for _, head := range []string{
		`{"id":"evt_1","type":"mcp.status.changed","location":{"directory":"/p"},"data":{"server":"`,       // not activity
		`{"id":"evt_1","type":"session.execution.started","data":{"sessionID":"` + strings.Repeat("s", 50), // no location
		`{"id":"evt_1","type":"session.created","location":{"directory":"/p`,                               // cut in the location
		`{"data":{"x":"`, `[`, ``,
	} {
		if ev, err := opencode.ParseEventV2Head([]byte(head)); err == nil {
			t.Errorf("head %.50q = %+v, want an error", head, ev)
		}
	}
}

func FuzzParseEventV2Head(f *testing.F) {
	f.Add([]byte(`{"type":"session.created","location":{"directory":"/p"},"data":{`))
	f.Add([]byte(`{"location":{"directory":"/p"},"type":"session.x"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := opencode.ParseEventV2Head(b)
		if err == nil && (ev.Kind != opencode.KindActivity || ev.Directory == "") {
			t.Fatalf("head %q = %+v", b, ev)
		}
	})
}
