package opencode_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode"
	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode/fake2"
)

func TestServiceFilePath(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		goos string
		env  map[string]string
		home string
		want string
	}{
		{"linux", nil, "/home/me", "/home/me/.local/state/opencode/service.json"},
		// macOS uses the XDG layout too, never ~/Library.
		{"darwin", nil, "/Users/me", "/Users/me/.local/state/opencode/service.json"},
		{"darwin", map[string]string{"XDG_STATE_HOME": "/Users/me/st"}, "/Users/me", "/Users/me/st/opencode/service.json"},
		{"linux", map[string]string{"XDG_STATE_HOME": "/x/state/"}, "/home/me", "/x/state/opencode/service.json"},
		// An empty XDG_STATE_HOME is unset.
		{"linux", map[string]string{"XDG_STATE_HOME": ""}, "/home/me", "/home/me/.local/state/opencode/service.json"},
		{"linux", nil, "", ""},
		{"windows", nil, `C:\Users\me`, `C:\Users\me\.local\state\opencode\service.json`},
	} {
		if got := opencode.ServiceFilePath(c.goos, env(c.env), c.home); got != c.want {
			t.Errorf("%s %v %q: %q, want %q", c.goos, c.env, c.home, got, c.want)
		}
	}
}

const pw = "Zq-very-secret-pw"

func writeService(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "opencode", "service.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadServiceFile(t *testing.T) {
	dir := t.TempDir()
	// A service.json in the shape docs/opencode.md#the-background-service-and-its-servicejson describes.
	p := writeService(t, dir, `{"id":"4c1e","version":"2.0.21","url":"http://127.0.0.1:49374","pid":8123,"password":"`+pw+`"}`)
	s, err := opencode.ReadServiceFile(p)
	if err != nil || s.URL != "http://127.0.0.1:49374" || s.PID != 8123 || s.Version != "2.0.21" || s.ID != "4c1e" || s.Password() != pw || s.Path != p {
		t.Fatalf("facts example: %v, %v", s, err)
	}
	for in, want := range map[string]string{
		"http://0.0.0.0:49374":  "http://127.0.0.1:49374",
		"http://[::]:49374/":    "http://[::1]:49374/",
		"http://localhost:4096": "http://localhost:4096",
		"http://0.0.0.0":        "http://127.0.0.1",
	} {
		s, err := opencode.ParseServiceFile("f", []byte(`{"url":"`+in+`","pid":1}`))
		if err != nil || s.URL != want || s.HasPassword() {
			t.Errorf("url %s: %q, %v; want %q", in, s.URL, err, want)
		}
	}
	if _, err := opencode.ReadServiceFile(filepath.Join(dir, "none.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// Broken files are errors that never quote the password.
	for _, bad := range []string{
		`{"url":"http://127.0.0.1:1","pid":1,"password":` + pw + `}`,
		`{"url":"http://127.0.0.1:1","pid":1,"password":"` + pw,
		`{"url":"http://127.0.0.1:1","pid":"` + pw + `","password":"` + pw + `"}`,
		`{"url":"http://opencode:` + pw + `@127.0.0.1:1","pid":1}`,
		`{"url":"` + pw + `","pid":1}`,
		`{"url":"http://127.0.0.1:1","pid":0,"password":"` + pw + `"}`,
		`{"url":"http://127.0.0.1:1","pid":1.5}`,
		`{"pid":1}`, `[]`, ``, `{"url":"ftp://x","pid":1}`,
		`{"url":"http://127.0.0.1:1","pid":1,"password":7}`,
	} {
		_, err := opencode.ParseServiceFile("f", []byte(bad))
		if err == nil {
			t.Errorf("ParseServiceFile(%q) = nil error", bad)
		} else if strings.Contains(err.Error(), "Zq") || strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseServiceFile error quotes the password: %v", err)
		}
	}
}

// The password never reaches output: not through fmt's verbs, not through
// slog, not through a struct that holds a Service in an unexported field.
func TestServicePasswordNeverPrinted(t *testing.T) {
	s, err := opencode.ParseServiceFile("/st/opencode/service.json", []byte(`{"id":"i","version":"2.0.21","url":"http://127.0.0.1:49374","pid":8123,"password":"`+pw+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	type holder struct {
		svc  opencode.Service
		ptr  *opencode.Service
		Svc  opencode.Service
		list []opencode.Service
	}
	h := holder{svc: s, ptr: &s, Svc: s, list: []opencode.Service{s}}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%T"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, &s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h))
	}
	outs = append(outs, fmt.Sprint(s), fmt.Sprintln(s, &s, h), s.String(), s.GoString())
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("found", "service", s, "ptr", &s, "holder", h)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("found", "service", s, "ptr", &s, "holder", h)
	outs = append(outs, buf.String())
	for _, o := range outs {
		if strings.Contains(o, "secret") || strings.Contains(o, "Zq") {
			t.Errorf("password printed: %s", o)
		}
	}
	if !strings.Contains(fmt.Sprint(s), "http://127.0.0.1:49374") || !strings.Contains(buf.String(), "pid=8123") {
		t.Errorf("the rest must still be printed: %v / %s", s, buf.String())
	}
}

// A service.json is trusted only when the server at its URL answers with
// its pid; a restart on another port with another password is followed by
// reading the file again.
func TestServiceFileVerifiedAgainstItsServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := fake2.New(map[string]fake2.Spec{"a": {}})
		tr, stop := fake.Serve()
		defer stop()
		o := opencode.Options{Transport: tr}
		// As the daemon follows a service: read the file, then verify it.
		discover := func(ctx context.Context, file string, o opencode.Options) (opencode.Service, error) {
			s, err := opencode.ReadServiceFile(file)
			if err != nil {
				return opencode.Service{}, err
			}
			_, err = s.Verify(ctx, o)
			return s, err
		}
		dir := t.TempDir()
		p := writeService(t, dir, fmt.Sprintf(`{"id":"1","version":%q,"url":"http://0.0.0.0:49374","pid":%d,"password":%q}`, fake2.DefaultVersion, fake2.DefaultPID, fake2.DefaultPassword))
		s, err := discover(context.Background(), p, o)
		if err != nil || s.Password() != fake2.DefaultPassword {
			t.Fatalf("discover: %v, %v", s, err)
		}
		c, _ := opencode.NewV2(s.URL, s.Options(o))
		if _, err := c.MCPStatus(context.Background(), "/p"); err != nil {
			t.Fatalf("client from the service: %v", err)
		}

		// Another process holds the port: stale.
		writeService(t, dir, fmt.Sprintf(`{"url":"http://127.0.0.1:49374","pid":%d,"password":%q}`, fake2.DefaultPID+1, fake2.DefaultPassword))
		if _, err := discover(context.Background(), p, o); !errors.Is(err, opencode.ErrStaleService) {
			t.Errorf("other pid: %v, want ErrStaleService", err)
		}
		writeService(t, dir, fmt.Sprintf(`{"version":"2.0.22","url":"http://127.0.0.1:49374","pid":%d,"password":%q}`, fake2.DefaultPID, fake2.DefaultPassword))
		if _, err := discover(context.Background(), p, o); !errors.Is(err, opencode.ErrStaleService) {
			t.Errorf("other version: %v, want ErrStaleService", err)
		}
		// The service restarted with a new password: the old one is
		// refused, the re-read file works.
		fake.SetPassword("new-" + pw)
		fake.SetPID(999)
		if _, err := c.MCPStatus(context.Background(), "/p"); !errors.Is(err, opencode.ErrUnauthorized) {
			t.Fatalf("old password after restart: %v", err)
		}
		if _, err := discover(context.Background(), p, o); !errors.Is(err, opencode.ErrUnauthorized) || strings.Contains(err.Error(), "secret") {
			t.Errorf("old file after restart: %v, want ErrUnauthorized", err)
		}
		writeService(t, dir, `{"id":"2","version":"2.1.2","url":"http://127.0.0.1:50000","pid":999,"password":"new-`+pw+`"}`)
		s2, err := discover(context.Background(), p, o)
		if err != nil || s2.URL != "http://127.0.0.1:50000" || s2.Same(s) {
			t.Fatalf("re-read: %v, %v", s2, err)
		}
		c2, _ := opencode.NewV2(s2.URL, s2.Options(o))
		if _, err := c2.MCPStatus(context.Background(), "/p"); err != nil {
			t.Errorf("client from the re-read service: %v", err)
		}
		if !s2.Same(s2) {
			t.Error("Same is not reflexive")
		}
	})
}

func FuzzParseServiceFile(f *testing.F) {
	f.Add([]byte(`{"id":"4c1e","version":"2.0.21","url":"http://127.0.0.1:49374","pid":8123,"password":"Zq"}`))
	f.Add([]byte(`{"url":"http://0.0.0.0:1","pid":1,"password":Zq}`))
	f.Add([]byte(`{"url":"http://[::]:1","pid":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := opencode.ParseServiceFile("f", b)
		if err != nil {
			return
		}
		if s.PID <= 0 || !strings.HasPrefix(s.URL, "http") {
			t.Fatalf("accepted %v", s)
		}
		if pw := s.Password(); len(pw) > 3 && (strings.Contains(fmt.Sprintf("%+v %#v", s, s), pw)) {
			t.Fatalf("password printed")
		}
	})
}

// BenchmarkRegistrations is one look for an OpenCode 2 service while none
// is followed (the daemon's every few seconds): one ReadDir of a state
// directory holding three service files and the rest of OpenCode's state.
func BenchmarkRegistrations(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"service.json", "service-local.json", "service-a1047eab1035d58682a53557e0b2a75edbfd15fd.json", "kv.json", "prompt-history.jsonl", "locks"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"url":"http://127.0.0.1:1","pid":1}`), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	file := filepath.Join(dir, "service.json")
	b.ReportAllocs()
	for b.Loop() {
		if regs, err := opencode.Registrations(file, true); err != nil || len(regs) != 3 {
			b.Fatal(regs, err)
		}
	}
}
