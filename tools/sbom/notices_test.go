package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// Each module is named with its version and followed by every licence
// file at its top (LICENSE*, COPYING, NOTICE, PATENTS), as it is; other
// files are not; a module without a licence stops the release.
func TestRenderNotices(t *testing.T) {
	dir := t.TempDir()
	mk := func(mod string, files map[string]string) string {
		d := filepath.Join(dir, mod)
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		for n, body := range files {
			if err := os.WriteFile(filepath.Join(d, n), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	mods := []noticeModule{
		{"stdlib", "go1.26.8", mk("go", map[string]string{"LICENSE": "Go licence\n", "PATENTS": "Go patents", "README.md": "no"})},
		{"example.com/a", "v1.0.0", mk("a", map[string]string{"LICENSE.txt": "A licence\n", "NOTICE": "A notice\n", "main.go": "package a"})},
		{"example.com/b", "v0.1.0", mk("b", map[string]string{"COPYING": "B licence\n", "sub/LICENSE": "not at the top"})},
	}
	b, err := renderNotices(mods)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"\n  stdlib go1.26.8\n  example.com/a v1.0.0\n  example.com/b v0.1.0\n",
		rule + "stdlib go1.26.8\n" + rule + "\n--- LICENSE\n\nGo licence\n\n--- PATENTS\n\nGo patents\n",
		rule + "example.com/a v1.0.0\n" + rule + "\n--- LICENSE.txt\n\nA licence\n\n--- NOTICE\n\nA notice\n",
		rule + "example.com/b v0.1.0\n" + rule + "\n--- COPYING\n\nB licence\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the notices lack %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"README.md", "package a", "not at the top", dir} {
		if strings.Contains(got, bad) {
			t.Errorf("the notices hold %q:\n%s", bad, got)
		}
	}
	mods = append(mods, noticeModule{"example.com/c", "v1.0.0", mk("c", map[string]string{"NOTICE": "only a notice"})})
	if _, err := renderNotices(mods); err == nil || !strings.Contains(err.Error(), "example.com/c v1.0.0 ships no licence") {
		t.Errorf("a module without a licence: %v", err)
	}
}

// The modules come from the module cache, checked against the build
// record's go.sum hash: a hash that does not match stops the release.
func TestNoticeModulesChecksTheSum(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip(err)
	}
	out, err := exec.Command(goCmd, "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	// golang.org/x/sys is a dependency of this module (../go.sum): in the
	// module cache, or fetched.
	gosum, err := os.ReadFile(filepath.Join("..", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	var sys *debug.Module
	for _, line := range strings.Split(string(gosum), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "golang.org/x/sys" && !strings.HasSuffix(f[1], "/go.mod") {
			sys = &debug.Module{Path: f[0], Version: f[1], Sum: f[2]}
		}
	}
	if sys == nil {
		t.Fatal("no golang.org/x/sys in ../go.sum")
	}
	b := binary("mcp-reconnect-linux-amd64", "linux", &debug.Module{Path: sys.Path, Version: sys.Version, Sum: sys.Sum})
	b.Info.GoVersion = strings.TrimSpace(string(out))
	mods, err := noticeModules(context.Background(), goCmd, []Binary{b})
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) != 2 || mods[0].Path != "stdlib" || mods[1].Path != sys.Path || mods[1].Version != sys.Version {
		t.Errorf("modules %+v", mods)
	}
	b.Info.Deps[0].Sum = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	if _, err := noticeModules(context.Background(), goCmd, []Binary{b}); err == nil || !strings.Contains(err.Error(), "the binaries were built from") {
		t.Errorf("a hash that does not match: %v", err)
	}
}
