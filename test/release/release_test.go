// Package release checks what `make release` puts in dist/: the binaries,
// one per target, for the right OS and CPU, stamped with the version,
// commit and date, free of local paths; the archives (archive_test.go) and
// the .deb and .rpm packages (packages_test.go), opened, their binary run
// or its architecture read; the container image (an OCI archive of the
// linux binaries, image_test.go); the SBOM (sbom_test.go) and the
// licences of what the binaries link, in every archive and package
// (notices_test.go); the Homebrew formula (formula_test.go); the npm
// packages, read and then published to a registry of the test's own on
// loopback, installed from it by npm and run (npm_test.go); every one of
// them in SHA256SUMS, and the same bytes when the whole release is
// rebuilt from a copy of the tree in another directory.
//
// It is a module of its own (go.mod), so that the RPM reader it needs is
// not a dependency of mcp-reconnect. It needs the release, which takes
// minutes to build, so without one it skips; `make release-check` (run by
// .ci/run after `make test`) builds it and runs this with
// MCP_RECONNECT_RELEASE_DIR set.
package release

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// targets are the release's platforms, as the Makefile's RELEASE_TARGETS.
var targets = []struct {
	goos, goarch string
	elf          elf.Machine
	macho        macho.Cpu
}{
	{"linux", "amd64", elf.EM_X86_64, 0},
	{"linux", "arm64", elf.EM_AARCH64, 0},
	{"darwin", "amd64", 0, macho.CpuAmd64},
	{"darwin", "arm64", 0, macho.CpuArm64},
}

func distDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCP_RECONNECT_RELEASE_DIR")
	if dir == "" {
		t.Skip("no release to check: run `make release-check` (sets MCP_RECONNECT_RELEASE_DIR)")
	}
	return dir
}

// repoRoot is the checkout the release was built from: two levels up.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// stamp is what scripts/release.sh wrote into the binaries with -X.
type stamp struct{ version, commit, date string }

var versionOut = regexp.MustCompile(`^mcp-reconnect (v\d+\.\d+\.\d+\S*)\ncommit: ([0-9a-f]{40})\ndate:   (\S+)\ngo:     (\S+) (\S+)\n$`)

// hostStamp runs the binary built for this machine: its `version` output
// is the stamp every other binary must carry too.
func hostStamp(t *testing.T, dir string) stamp {
	t.Helper()
	bin := filepath.Join(dir, fmt.Sprintf("mcp-reconnect-%s-%s", runtime.GOOS, runtime.GOARCH))
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v (the release must include this machine's platform to be checked here)", bin, err)
	}
	m := versionOut.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("%s version printed %q, want version, full commit, date and Go", bin, out)
	}
	if want := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH; m[4]+" "+m[5] != want {
		t.Errorf("go: %s %s, want %s", m[4], m[5], want)
	}
	return stamp{m[1], m[2], m[3]}
}

// checkBuild reads a binary's build record (debug/buildinfo parses ELF and
// Mach-O alike) for the settings a reproducible release needs. (-trimpath
// keeps -ldflags out of the record, so the stamp is checked in the bytes.)
func checkBuild(t *testing.T, path, goos, goarch string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	want := map[string]string{"GOOS": goos, "GOARCH": goarch, "CGO_ENABLED": "0", "-trimpath": "true", "vcs.revision": ""}
	for k, v := range want {
		if set[k] != v {
			t.Errorf("%s: build setting %s = %q, want %q", path, k, set[k], v)
		}
	}
	if bi.Path != "github.com/mcp-reconnect/mcp-reconnect/cmd/mcp-reconnect" {
		t.Errorf("%s: main package %s", path, bi.Path)
	}
}

// checkArch reads the executable header: the CPU, and for Linux a static
// binary (no interpreter: it runs on any distribution).
func checkArch(t *testing.T, path string, wantELF elf.Machine, wantMacho macho.Cpu) {
	t.Helper()
	if wantELF != 0 {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s is not ELF: %v", path, err)
		}
		defer f.Close()
		if f.Machine != wantELF || f.Class != elf.ELFCLASS64 || f.Type != elf.ET_EXEC {
			t.Errorf("%s: ELF %v %v %v, want %v ELFCLASS64 ET_EXEC", path, f.Machine, f.Class, f.Type, wantELF)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: dynamically linked (PT_INTERP); CGO_ENABLED=0 should make it static", path)
			}
		}
		return
	}
	f, err := macho.Open(path)
	if err != nil {
		t.Fatalf("%s is not Mach-O: %v", path, err)
	}
	defer f.Close()
	if f.Cpu != wantMacho || f.Type != macho.TypeExec {
		t.Errorf("%s: Mach-O %v %v, want %v executable", path, f.Cpu, f.Type, wantMacho)
	}
}

// localPaths are strings that would tie a binary to the machine that built
// it. $HOME is checked with a trailing slash: "/root" alone is also part of
// crypto/x509/root.go.
func localPaths(t *testing.T, root string) []string {
	t.Helper()
	paths := []string{root}
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		paths = append(paths, home+"/")
	}
	for _, v := range []string{"GOROOT", "GOMODCACHE", "GOPATH", "GOCACHE"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.TrimSpace(string(out)); p != "" && p != "/" {
			paths = append(paths, p)
		}
	}
	return paths
}

func sha(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// readSums parses SHA256SUMS ("<hex>  <name>" per line).
func readSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		sums[name] = sum
	}
	return sums
}

// The release's other files, beside the binaries and their archives and
// packages.
const (
	sbomFile    = "mcp-reconnect.spdx.json"
	formulaFile = "mcp-reconnect.rb"
)

// assetName is the stem of a target's assets: mcp-reconnect-OS-ARCH.
func assetName(goos, goarch string) string { return "mcp-reconnect-" + goos + "-" + goarch }

// releaseAssets are the files make release writes, each in SHA256SUMS.
func releaseAssets() []string {
	var out []string
	for _, tg := range targets {
		n := assetName(tg.goos, tg.goarch)
		out = append(out, n, n+".tar.gz")
		if tg.goos == "linux" {
			out = append(out, n+".deb", n+".rpm")
		}
		out = append(out, npmAsset(tg.goos, tg.goarch))
	}
	return append(out, npmMainAsset, imageArchive, sbomFile, formulaFile)
}

// Every file of the release is in SHA256SUMS with its sha256, and nothing
// else is, and every file's mtime is the commit's.
func TestReleaseSums(t *testing.T) {
	dir := distDir(t)
	st := hostStamp(t, dir)
	commitTime, err := time.Parse(time.RFC3339, st.date)
	if err != nil {
		t.Fatal(err)
	}
	sums := readSums(t, dir)
	want := releaseAssets()
	if len(sums) != len(want) {
		t.Errorf("SHA256SUMS lists %d files, want %d: %v", len(sums), len(want), want)
	}
	for _, name := range want {
		if got := sha(t, filepath.Join(dir, name)); got != sums[name] {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %q", name, got, sums[name])
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if _, listed := sums[e.Name()]; !listed && e.Name() != "SHA256SUMS" {
			t.Errorf("dist/%s is not in SHA256SUMS", e.Name())
		}
		if !fi.ModTime().Equal(commitTime) {
			t.Errorf("dist/%s: mtime %v, want the commit's time %v", e.Name(), fi.ModTime().UTC(), commitTime)
		}
	}
}

func TestReleaseBinaries(t *testing.T) {
	dir := distDir(t)
	root := repoRoot(t)
	st := hostStamp(t, dir)
	if head := git(t, root, "rev-parse", "HEAD"); st.commit != head {
		t.Errorf("stamped commit %s, checkout is at %s", st.commit, head)
	}
	if d := git(t, root, "log", "-1", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", "--format=%cd", "HEAD"); st.date != d {
		t.Errorf("stamped date %s, the commit's is %s", st.date, d)
	}
	commitTime, err := time.Parse(time.RFC3339, st.date)
	if err != nil {
		t.Fatal(err)
	}
	sums := readSums(t, dir)
	forbidden := localPaths(t, root)
	for _, tg := range targets {
		name := fmt.Sprintf("mcp-reconnect-%s-%s", tg.goos, tg.goarch)
		path := filepath.Join(dir, name)
		t.Run(name, func(t *testing.T) {
			if got := sha(t, path); got != sums[name] {
				t.Errorf("sha256 %s, SHA256SUMS says %q", got, sums[name])
			}
			checkArch(t, path, tg.elf, tg.macho)
			checkBuild(t, path, tg.goos, tg.goarch)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if !fi.ModTime().Equal(commitTime) {
				t.Errorf("mtime %v, want the commit's time %v", fi.ModTime().UTC(), commitTime)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{st.version, st.commit, st.date} {
				if !bytes.Contains(b, []byte(v)) {
					t.Errorf("stamp %q is not in the binary", v)
				}
			}
			for _, p := range forbidden {
				if i := bytes.Index(b, []byte(p)); i >= 0 {
					lo, hi := max(0, i-40), min(len(b), i+len(p)+40)
					t.Errorf("local path %q in the binary: %q", p, b[lo:hi])
				}
			}
		})
	}
}

// The release is reproducible: scripts/release.sh run again, for every
// target, in a clone of the checkout in another directory (other absolute
// paths; uncommitted changes copied over, so the version says -dirty
// alike) writes the same bytes: binaries, archives, packages, npm
// packages, image, SBOM and formula, so the same SHA256SUMS.
func TestReleaseIsReproducible(t *testing.T) {
	dir := distDir(t)
	root := repoRoot(t)
	st := hostStamp(t, dir)
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	git(t, root, "clone", "--quiet", "--no-hardlinks", "--no-checkout", root, elsewhere)
	git(t, elsewhere, "checkout", "--quiet", "--detach", st.commit)
	for _, f := range strings.Split(git(t, root, "ls-files", "-co", "--exclude-standard", "-z"), "\x00") {
		if f == "" {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(root, f)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			// A symlink (the recorded /proc trees' cwd links): as it is.
			target, err := os.Readlink(filepath.Join(root, f))
			if err != nil {
				t.Fatal(err)
			}
			_ = os.Remove(filepath.Join(elsewhere, f))
			if err := os.MkdirAll(filepath.Dir(filepath.Join(elsewhere, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(elsewhere, f)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			_ = os.Remove(filepath.Join(elsewhere, f)) // deleted in the work tree
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(elsewhere, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(elsewhere, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"scripts/release.sh"}
	for _, tg := range targets {
		args = append(args, tg.goos+"/"+tg.goarch)
	}
	cmd := exec.Command("bash", args...)
	cmd.Dir = elsewhere
	cmd.Env = append(os.Environ(), "VERSION="+st.version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh in %s: %v\n%s", elsewhere, err, out)
	}
	want, got := readSums(t, dir), readSums(t, filepath.Join(elsewhere, "dist"))
	for _, name := range releaseAssets() {
		if got[name] != want[name] {
			t.Errorf("%s rebuilt in %s: sha256 %s, the release has %s: it is not reproducible", name, elsewhere, got[name], want[name])
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	b, _ := os.ReadFile(filepath.Join(elsewhere, "dist", "SHA256SUMS"))
	if !bytes.Equal(a, b) {
		t.Errorf("SHA256SUMS differs when rebuilt:\n%s\n--- rebuilt:\n%s", a, b)
	}
}
