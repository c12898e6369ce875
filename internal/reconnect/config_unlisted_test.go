package reconnect

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// unlistedConfig is a fake whose config read leaves out one server that
// status lists (as OpenCode does for a server added at run time with
// POST /mcp, which lives in the instance's state, not in its config).
type unlistedConfig struct {
	fakeOC
	hide string
}

func (u *unlistedConfig) ServeHTTP(w http.ResponseWriter, q *http.Request) {
	if q.URL.Path != "/config" && q.URL.Path != "/api/config" {
		u.fakeOC.ServeHTTP(w, q)
		return
	}
	rec := httptest.NewRecorder()
	u.fakeOC.ServeHTTP(rec, q)
	var body any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err == nil {
		hide := func(o any) {
			if m, ok := o.(map[string]any); ok {
				if mcp, ok := m["mcp"].(map[string]any); ok {
					delete(mcp, u.hide) // 1.x
					if servers, ok := mcp["servers"].(map[string]any); ok {
						delete(servers, u.hide) // 2.x
					}
				}
			}
		}
		if layers, ok := body.([]any); ok { // 2.x: layers, each with info.mcp.servers
			for _, l := range layers {
				if m, ok := l.(map[string]any); ok {
					hide(m["info"])
				}
			}
		} else {
			hide(body)
		}
		b, _ := json.Marshal(body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(b)
		return
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// A server that status lists and GET /config does not (added at run
// time) must not clear kindsKnown at every check, or every idle check
// reads the config again, forever: 21 config reads in ten idle minutes
// of one directory, where the engine should read it once (TestRequestsAreExactlyTheSchedule
// allows one per directory). With many directories that is a config
// resolution per directory per idle interval for nothing.
func TestServerMissingFromConfigDoesNotReadConfigAtEveryCheck(t *testing.T) {
	eachGen(t, func(t *testing.T, g generation) {
		inner := g.new(map[string]Spec{"ok": {}, "added": {}})
		fake := &unlistedConfig{fakeOC: inner, hide: "added"}
		r := newRig(t, fake, noJitter(), nil)
		if err := r.eng.Arm(dirA, "--directory"); err != nil {
			t.Fatal(err)
		}
		r.at(10 * time.Minute)
		reads := inner.Count(routeStatus, dirA, "")
		if n := inner.Count(routeConfig, dirA, ""); n > 2 {
			t.Fatalf("config reads in 10 idle minutes = %d (status reads %d), want 1: a server missing from GET /config makes every check read the config again", n, reads)
		}
	})
}
