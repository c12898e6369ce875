package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// The npm packages: mcp-reconnect (a command that runs the binary) and
// one @mcp-reconnect/OS-CPU per target in npm's names, holding its
// binary.
const npmMainAsset = "mcp-reconnect-npm.tgz"

// npmPlatform is a target's OS-CPU in npm's names (Node's process.platform
// and process.arch).
func npmPlatform(goos, goarch string) string {
	return goos + "-" + map[string]string{"amd64": "x64", "arm64": "arm64"}[goarch]
}

func npmAsset(goos, goarch string) string {
	return "mcp-reconnect-npm-" + npmPlatform(goos, goarch) + ".tgz"
}

// npmVersion is the release's version as npm's: without the "v".
func npmVersion(version string) string { return strings.TrimPrefix(version, "v") }

// tgzFile is one file of an npm tarball.
type tgzFile struct {
	mode int64
	body []byte
}

// readTgz reads an npm tarball as `npm publish` takes it and as the
// release must write it: gzip without name or time, every entry under
// package/, sorted, owned by 0:0, at the commit's time, regular files
// and directories only.
func readTgz(t *testing.T, path string, commitTime time.Time) map[string]tgzFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("%s: gzip header names %q at %v", path, zr.Name, zr.ModTime)
	}
	files := map[string]tgzFile{}
	var names []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !strings.HasPrefix(h.Name, "package/") || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(commitTime) {
			t.Errorf("%s: %s owner %d:%d mtime %v, want under package/, 0:0, the commit's time", path, h.Name, h.Uid, h.Gid, h.ModTime.UTC())
		}
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "package/")] = tgzFile{h.Mode, b}
		default:
			t.Errorf("%s: %s of type %c", path, h.Name, h.Typeflag)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("%s: entries not sorted: %v", path, names)
	}
	return files
}

// npmManifest is what the checks read of a package.json.
type npmManifest struct {
	Name, Version, License, Homepage string
	Bin                              map[string]string
	OS, CPU                          []string
	OptionalDependencies             map[string]string
	Dependencies                     map[string]string
	Scripts                          map[string]string
}

// The npm packages as published: mcp-reconnect at the release's version
// (a semantic version), for linux and darwin on x64 and arm64 only, its
// command executable, with one optional dependency per target at exactly
// this version and nothing else to install, no install script (nothing
// runs or downloads at install time); each @mcp-reconnect/OS-CPU for its
// one OS and CPU, holding that target's release binary byte for byte
// (0755); every one with LICENSE and THIRD_PARTY_NOTICES.
func TestNPMPackages(t *testing.T) {
	dir := distDir(t)
	root := repoRoot(t)
	st := hostStamp(t, dir)
	commitTime, err := time.Parse(time.RFC3339, st.date)
	if err != nil {
		t.Fatal(err)
	}
	sums := readSums(t, dir)
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	notices := archiveNotices(t, dir)
	version := npmVersion(st.version)
	common := func(t *testing.T, files map[string]tgzFile) npmManifest {
		t.Helper()
		var m npmManifest
		if err := json.Unmarshal(files["package.json"].body, &m); err != nil {
			t.Fatalf("package.json: %v", err)
		}
		if m.Version != version || m.License != setting("LICENSE_SPDX") || m.Homepage != setting("SOURCE_URL") {
			t.Errorf("version %q license %q homepage %q, want %s %s %s", m.Version, m.License, m.Homepage, version, setting("LICENSE_SPDX"), setting("SOURCE_URL"))
		}
		if len(m.Scripts) != 0 || len(m.Dependencies) != 0 {
			t.Errorf("scripts %v dependencies %v: want none", m.Scripts, m.Dependencies)
		}
		if _, ok := files["binding.gyp"]; ok {
			t.Error("a binding.gyp: npm would build it at install time")
		}
		if !bytes.Equal(files["LICENSE"].body, license) || !bytes.Equal(files["THIRD_PARTY_NOTICES"].body, notices) {
			t.Error("LICENSE or THIRD_PARTY_NOTICES is not the release's")
		}
		return m
	}
	wantDeps := map[string]string{}
	for _, tg := range targets {
		name := npmAsset(tg.goos, tg.goarch)
		wantDeps["@mcp-reconnect/"+npmPlatform(tg.goos, tg.goarch)] = version
		t.Run(name, func(t *testing.T) {
			files := readTgz(t, filepath.Join(dir, name), commitTime)
			m := common(t, files)
			plat := strings.SplitN(npmPlatform(tg.goos, tg.goarch), "-", 2)
			if m.Name != "@mcp-reconnect/"+npmPlatform(tg.goos, tg.goarch) || fmt.Sprint(m.OS) != fmt.Sprint([]string{plat[0]}) ||
				fmt.Sprint(m.CPU) != fmt.Sprint([]string{plat[1]}) || len(m.Bin) != 0 || len(m.OptionalDependencies) != 0 {
				t.Errorf("package.json %+v", m)
			}
			bin := files["bin/mcp-reconnect"]
			if bin.mode != 0o755 || shaBytes(bin.body) != sums[assetName(tg.goos, tg.goarch)] {
				t.Errorf("bin/mcp-reconnect: mode %o sha256 %s, want 0755 and %s's", bin.mode, shaBytes(bin.body), assetName(tg.goos, tg.goarch))
			}
		})
	}
	t.Run(npmMainAsset, func(t *testing.T) {
		files := readTgz(t, filepath.Join(dir, npmMainAsset), commitTime)
		m := common(t, files)
		if m.Name != "mcp-reconnect" || fmt.Sprint(m.OS) != "[darwin linux]" || fmt.Sprint(m.CPU) != "[arm64 x64]" || fmt.Sprint(m.OptionalDependencies) != fmt.Sprint(wantDeps) {
			t.Errorf("package.json %+v, want optional dependencies %v", m, wantDeps)
		}
		cmd := files[m.Bin["mcp-reconnect"]]
		if len(m.Bin) != 1 || cmd.mode != 0o755 || !bytes.HasPrefix(cmd.body, []byte("#!/usr/bin/env node\n")) {
			t.Errorf("bin %v: mode %o, want one command, 0755, run by node", m.Bin, cmd.mode)
		}
		if !bytes.Equal(files["README.md"].body, readme) {
			t.Error("README.md is not the checkout's")
		}
	})
}

// hostTarget is the index of this machine's target.
func hostTarget(t *testing.T) int {
	t.Helper()
	for i, tg := range targets {
		if tg.goos == runtime.GOOS && tg.goarch == runtime.GOARCH {
			return i
		}
	}
	t.Skipf("the release has no binary for %s/%s", runtime.GOOS, runtime.GOARCH)
	return -1
}
