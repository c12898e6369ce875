package daemon

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

// A service that answers but refuses the password its own file registers
// is the file ChooseService names (doctor says "its service refuses the
// password it registers"), with an error that matches ErrUnauthorized:
// not "no service answers".
func TestChooseServiceNamesTheServiceThatRefusesItsPassword(t *testing.T) {
	v2 := fake2.New(map[string]fakeopencode.Spec{"s": {}})
	hs := httptest.NewServer(v2)
	defer hs.Close()
	file := filepath.Join(t.TempDir(), "service.json")
	registerService(t, file, hs.URL, fake2.DefaultVersion, 4242, "not-"+fake2.DefaultPassword, time.Now())

	svc, others, err := ChooseService(context.Background(), file, false)
	if !errors.Is(err, opencode.ErrUnauthorized) {
		t.Fatalf("err = %v, want one that matches opencode.ErrUnauthorized", err)
	}
	if svc.Path != file || svc.URL != hs.URL || len(others) != 0 {
		t.Fatalf("ChooseService = %+v, %v; want the refusing service's file %s at %s", svc, others, file, hs.URL)
	}
}
