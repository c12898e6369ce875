package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goreleaser/nfpm/v2/files"
)

var created = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// fakeBinary is a stand-in for mcp-reconnect that prints its completions
// and writes its manual pages as the real one does, saying what
// environment it got.
func fakeBinary(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "mcp-reconnect")
	script := `#!/bin/sh
case "$1" in
completion) echo "# $2 completion; HOME=$HOME XDG_CONFIG_HOME=$XDG_CONFIG_HOME SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH" ;;
man) echo ".TH MCP-RECONNECT 1 default ~/.config/mcp-reconnect/config.toml" > "$2/mcp-reconnect.1"; echo ".TH MCP-RECONNECT-WATCH 1" > "$2/mcp-reconnect-watch.1" ;;
*) exit 2 ;;
esac
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func options(t *testing.T, dir string) Options {
	t.Helper()
	docs, err := GenerateDocs(context.Background(), fakeBinary(t, dir), created)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Out: filepath.Join(dir, "out"), Version: "v1.2.3", Created: created, Homepage: "https://example.com/p", License: "MIT",
		Maintainer: "the mcp-reconnect authors", Readme: []byte("# mcp-reconnect\n"), Docs: docs, Notices: []byte("notices\n"),
		LicenseText: []byte("MIT License\n\nCopyright (c) 2026 the mcp-reconnect authors\n\nPermission is hereby granted.\n\nTHE SOFTWARE IS PROVIDED \"AS IS\".\n")}
	if err := os.Mkdir(o.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"linux/amd64", "linux/arm64", "darwin/arm64"} {
		goos, goarch, _ := strings.Cut(p, "/")
		bin := filepath.Join(dir, "mcp-reconnect-"+goos+"-"+goarch)
		if err := os.WriteFile(bin, []byte("binary for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		o.Binaries = append(o.Binaries, Binary{OS: goos, Arch: goarch, Path: bin})
	}
	return o
}

// The docs come from the binary run with a home of "~", no XDG variable
// and the commit's time as SOURCE_DATE_EPOCH, whoever builds.
func TestGenerateDocsEnvironment(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/home/builder/.config")
	d, err := GenerateDocs(context.Background(), fakeBinary(t, t.TempDir()), created)
	if err != nil {
		t.Fatal(err)
	}
	want := "# zsh completion; HOME=~ XDG_CONFIG_HOME= SOURCE_DATE_EPOCH=1796119200\n" // 2026-12-01T10:00:00Z
	if got := string(d.Completions["zsh"]); got != want {
		t.Errorf("zsh completion %q, want %q", got, want)
	}
	if got := d.manPages(); strings.Join(got, " ") != "mcp-reconnect-watch.1 mcp-reconnect.1" {
		t.Errorf("pages %v", got)
	}
}

// Docs that name the builder's home are refused: the pages would show
// another user's paths.
func TestGenerateDocsRefusesLocalPaths(t *testing.T) {
	dir := t.TempDir()
	home, err := os.UserHomeDir()
	if err != nil || home == "/" {
		if os.Getenv("CI") != "" {
			t.Fatalf("no home under CI: %v", err)
		}
		t.Skip("no home")
	}
	p := filepath.Join(dir, "mcp-reconnect")
	script := "#!/bin/sh\ncase \"$1\" in completion) echo x ;; man) echo '" + home + "/.config' > \"$2/mcp-reconnect.1\" ;; esac\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := GenerateDocs(context.Background(), p, created); err == nil || !strings.Contains(err.Error(), "local path") {
		t.Fatalf("a page naming %s: %v", home, err)
	}
}

func assets(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][32]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = sha256.Sum256(b)
	}
	return out
}

// An archive per binary, a .deb and an .rpm per linux one; the same
// inputs give the same bytes, wherever they are and whatever their file
// times.
func TestBuildIsReproducible(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	oa, ob := options(t, a), options(t, b)
	if err := os.Chtimes(ob.Binaries[0].Path, time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	wa, err := Build(oa)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(ob); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range wa {
		names = append(names, filepath.Base(w))
	}
	if got := strings.Join(names, " "); got != "mcp-reconnect-darwin-arm64.tar.gz mcp-reconnect-linux-amd64.tar.gz mcp-reconnect-linux-amd64.deb mcp-reconnect-linux-amd64.rpm mcp-reconnect-linux-arm64.tar.gz mcp-reconnect-linux-arm64.deb mcp-reconnect-linux-arm64.rpm "+
		"mcp-reconnect-npm-darwin-arm64.tgz mcp-reconnect-npm-linux-arm64.tgz mcp-reconnect-npm-linux-x64.tgz mcp-reconnect-npm.tgz" {
		t.Errorf("written: %s", got)
	}
	sa, sb := assets(t, oa.Out), assets(t, ob.Out)
	if len(sa) != 11 {
		t.Errorf("%d files in out: %v", len(sa), sa)
	}
	for name, sum := range sa {
		if sb[name] != sum {
			t.Errorf("%s differs between two builds of the same inputs", name)
		}
	}
}

// The archive: one top directory named like the asset, the binary 0755
// and the rest 0644 at the paths the formula installs from, directories
// listed, sorted, owned by 0:0, every time the commit's; gzip without a
// name or time.
func TestArchiveLayout(t *testing.T) {
	o := options(t, t.TempDir())
	if _, err := Build(o); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(o.Out, "mcp-reconnect-linux-arm64.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header: name %q time %v", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	got := map[string]int64{}
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		got[h.Name] = h.Mode
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(created) {
			t.Errorf("%s: owner %d:%d time %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Name == "mcp-reconnect-linux-arm64/mcp-reconnect" {
			if b, _ := io.ReadAll(tr); string(b) != "binary for linux/arm64" {
				t.Errorf("the binary is %q", b)
			}
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("not sorted: %v", names)
	}
	top := "mcp-reconnect-linux-arm64/"
	for name, mode := range map[string]int64{
		top: 0o755, top + "mcp-reconnect": 0o755, top + "LICENSE": 0o644, top + "README.md": 0o644, top + "THIRD_PARTY_NOTICES": 0o644,
		top + "completions/": 0o755, top + "completions/mcp-reconnect.bash": 0o644, top + "completions/_mcp-reconnect": 0o644,
		top + "completions/mcp-reconnect.fish": 0o644, top + "man/man1/": 0o755, top + "man/man1/mcp-reconnect.1": 0o644,
		top + "man/man1/mcp-reconnect-watch.1": 0o644,
	} {
		if m, ok := got[name]; !ok || m != mode {
			t.Errorf("%s: mode %o (present %v), want %o", name, m, ok, mode)
		}
	}
	for name := range got {
		if !strings.HasPrefix(name, top) {
			t.Errorf("%s is outside the top directory", name)
		}
	}
}

// Each package puts the files where its distribution looks: the zsh
// completion in Debian's vendor-completions or Fedora's site-functions,
// the licence in Debian's copyright file or as the .rpm's %license; the
// man pages compressed; the unit the service package renders for
// /usr/bin/mcp-reconnect.
func TestPackageFiles(t *testing.T) {
	o := options(t, t.TempDir())
	byDst := func(format string) map[string]pkgFile {
		pf, err := o.packageFiles(format, []byte("bin"))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]pkgFile{}
		for _, f := range pf {
			m[f.dst] = f
		}
		return m
	}
	deb, rpm := byDst("deb"), byDst("rpm")
	for _, m := range []map[string]pkgFile{deb, rpm} {
		if f := m["/usr/bin/mcp-reconnect"]; f.mode != 0o755 || string(f.body) != "bin" {
			t.Errorf("the binary: %+v", f)
		}
		unit := m["/usr/lib/systemd/user/mcp-reconnect.service"]
		if unit.mode != 0o644 || !bytes.Contains(unit.body, []byte(`ExecStart="/usr/bin/mcp-reconnect" "watch"`)) {
			t.Errorf("the unit: %o\n%s", unit.mode, unit.body)
		}
		page := m["/usr/share/man/man1/mcp-reconnect-watch.1.gz"]
		zr, err := gzip.NewReader(bytes.NewReader(page.body))
		if err != nil {
			t.Fatalf("the watch page is not gzip: %v", err)
		}
		if b, _ := io.ReadAll(zr); string(b) != string(o.Docs.Man["mcp-reconnect-watch.1"]) {
			t.Errorf("the watch page holds %q", b)
		}
		if m["/usr/share/bash-completion/completions/mcp-reconnect"].body == nil || m["/usr/share/fish/vendor_completions.d/mcp-reconnect.fish"].body == nil {
			t.Error("bash or fish completion missing")
		}
	}
	if deb["/usr/share/zsh/vendor-completions/_mcp-reconnect"].body == nil || rpm["/usr/share/zsh/site-functions/_mcp-reconnect"].body == nil {
		t.Error("zsh completion not where the distribution's zsh looks")
	}
	if f := rpm["/usr/share/licenses/mcp-reconnect/LICENSE"]; f.typ != files.TypeRPMLicense || string(f.body) != string(o.LicenseText) {
		t.Errorf("the rpm's licence: %+v", f)
	}
	if f := rpm["/usr/share/licenses/mcp-reconnect/THIRD_PARTY_NOTICES"]; f.typ != files.TypeRPMLicense || string(f.body) != string(o.Notices) {
		t.Errorf("the rpm's notices: %+v", f)
	}
	if f := deb["/usr/share/doc/mcp-reconnect/THIRD_PARTY_NOTICES"]; string(f.body) != string(o.Notices) {
		t.Errorf("the deb's notices: %+v", f)
	}
	c := string(deb["/usr/share/doc/mcp-reconnect/copyright"].body)
	for _, want := range []string{"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n", "Files: *\nCopyright: 2026 the mcp-reconnect authors\nLicense: MIT\n Permission is hereby granted.\n .\n THE SOFTWARE"} {
		if !strings.Contains(c, want) {
			t.Errorf("copyright lacks %q:\n%s", want, c)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	o := options(t, t.TempDir())
	o.Binaries = append(o.Binaries, o.Binaries[0])
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a platform twice: %v", err)
	}
	o = options(t, t.TempDir())
	delete(o.Docs.Completions, "fish")
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "fish") {
		t.Errorf("no fish completion: %v", err)
	}
	o = options(t, t.TempDir())
	o.LicenseText = []byte("no holder\n")
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "Copyright") {
		t.Errorf("a LICENSE without a copyright line: %v", err)
	}
}
