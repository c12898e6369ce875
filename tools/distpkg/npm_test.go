package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readTgz returns an npm tarball's files (name → mode, body).
func readTgz(t *testing.T, path string) (map[string]int64, map[string][]byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	modes, bodies := map[string]int64{}, map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return modes, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Name, "package/") || !h.ModTime.Equal(created) || h.Uid != 0 {
			t.Errorf("%s: outside package/, or time %v owner %d", h.Name, h.ModTime, h.Uid)
		}
		modes[h.Name] = h.Mode
		bodies[h.Name], _ = io.ReadAll(tr)
	}
}

// The packages npm installs: mcp-reconnect, naming one optional
// dependency per binary at the release's version and allowing only the
// platforms built, its command executable; each platform package saying
// its one OS and CPU in npm's names and holding its binary, 0755; all
// with the licence and the notices.
func TestNPMPackages(t *testing.T) {
	o := options(t, t.TempDir())
	if _, err := Build(o); err != nil {
		t.Fatal(err)
	}
	var main struct {
		Name, Version, License, Main string
		Bin                          map[string]string
		OS, CPU                      []string
		OptionalDependencies         map[string]string
	}
	modes, files := readTgz(t, filepath.Join(o.Out, "mcp-reconnect-npm.tgz"))
	if err := json.Unmarshal(files["package/package.json"], &main); err != nil {
		t.Fatal(err)
	}
	if main.Name != "mcp-reconnect" || main.Version != "1.2.3" || main.License != "MIT" || main.Bin["mcp-reconnect"] != "bin/mcp-reconnect.cjs" ||
		strings.Join(main.OS, " ") != "darwin linux" || strings.Join(main.CPU, " ") != "arm64 x64" ||
		len(main.OptionalDependencies) != 3 || main.OptionalDependencies["@mcp-reconnect/darwin-arm64"] != "1.2.3" {
		t.Errorf("mcp-reconnect's package.json: %+v", main)
	}
	if main.Main != "plugin/index.mjs" || len(files["package/index.mjs"]) == 0 || len(files["package/plugin/index.mjs"]) == 0 || len(files["package/lib/binary.cjs"]) == 0 {
		t.Errorf("the OpenCode plugin: main %q, files %v", main.Main, len(files))
	}
	if modes["package/bin/mcp-reconnect.cjs"] != 0o755 || !bytes.HasPrefix(files["package/bin/mcp-reconnect.cjs"], []byte("#!/usr/bin/env node\n")) {
		t.Errorf("the command: mode %o", modes["package/bin/mcp-reconnect.cjs"])
	}
	for _, f := range []string{"package/LICENSE", "package/THIRD_PARTY_NOTICES", "package/README.md"} {
		if len(files[f]) == 0 {
			t.Errorf("no %s", f)
		}
	}
	var plat struct {
		Name, Version string
		OS, CPU       []string
		Bin           any
	}
	modes, files = readTgz(t, filepath.Join(o.Out, "mcp-reconnect-npm-linux-x64.tgz"))
	if err := json.Unmarshal(files["package/package.json"], &plat); err != nil {
		t.Fatal(err)
	}
	if plat.Name != "@mcp-reconnect/linux-x64" || plat.Version != "1.2.3" || strings.Join(plat.OS, " ") != "linux" || strings.Join(plat.CPU, " ") != "x64" || plat.Bin != nil {
		t.Errorf("the platform package.json: %+v", plat)
	}
	if modes["package/bin/mcp-reconnect"] != 0o755 || string(files["package/bin/mcp-reconnect"]) != "binary for linux/amd64" {
		t.Errorf("the binary: mode %o, %q", modes["package/bin/mcp-reconnect"], files["package/bin/mcp-reconnect"])
	}
	if string(files["package/THIRD_PARTY_NOTICES"]) != "notices\n" || string(files["package/LICENSE"]) != string(o.LicenseText) {
		t.Error("the platform package lacks the licence or the notices")
	}
}

// npm needs a semantic version: a tag as it is, a Go pseudo-version as a
// pre-release; one npm would refuse stops the release.
func TestNPMVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3":                             "1.2.3",
		"v1.2.3-rc.1":                        "1.2.3-rc.1",
		"v0.0.0-20261207101500-abcdef123456": "0.0.0-20261207101500-abcdef123456",
		"v0.0.0-20261207101500-012345678901-dirty": "0.0.0-20261207101500-012345678901-dirty",
		"v1.2.3-4-gabcdef1":                        "1.2.3-4-gabcdef1",
		"v1.2.3-rc.01":                             "",
		"v1.2":                                     "",
		"v1.2.3+incompatible":                      "",
	} {
		got, err := NPMVersion(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("NPMVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
