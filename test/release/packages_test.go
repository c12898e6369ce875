package release

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	rpmutils "github.com/sassoftware/go-rpmutils"

	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
)

// linuxTargets are the targets with a .deb and an .rpm.
func linuxTargets() []int {
	var out []int
	for i, tg := range targets {
		if tg.goos == "linux" {
			out = append(out, i)
		}
	}
	return out
}

// packageVersion is the release's version as a package's: without the v,
// its pre-release after a "~" (so it sorts before the release itself),
// with "-" as "_" in an .rpm (where "-" parts the release off).
func packageVersion(version, format string) string {
	v := strings.TrimPrefix(version, "v")
	if base, pre, ok := strings.Cut(v, "-"); ok {
		if format == "rpm" {
			pre = strings.ReplaceAll(pre, "-", "_")
		}
		v = base + "~" + pre
	}
	return v
}

// packageFile is one file a package must hold: its path and mode.
type packageFile struct {
	path string
	mode os.FileMode
}

// packageFiles are the files of the .deb or .rpm: the binary, the user
// unit, the completions where each distribution's shell reads them, the
// manual pages (compressed), the licence and the notices.
func packageFiles(format string) []packageFile {
	zsh := "/usr/share/zsh/vendor-completions/_mcp-reconnect"
	licence, notices := "/usr/share/doc/mcp-reconnect/copyright", "/usr/share/doc/mcp-reconnect/"+noticesFile
	if format == "rpm" {
		zsh, licence, notices = "/usr/share/zsh/site-functions/_mcp-reconnect", "/usr/share/licenses/mcp-reconnect/LICENSE", "/usr/share/licenses/mcp-reconnect/"+noticesFile
	}
	out := []packageFile{
		{"/usr/bin/mcp-reconnect", 0o755},
		{service.PackageUnitDir + "/" + service.UnitName, 0o644},
		{"/usr/share/bash-completion/completions/mcp-reconnect", 0o644},
		{"/usr/share/fish/vendor_completions.d/mcp-reconnect.fish", 0o644},
		{zsh, 0o644},
		{licence, 0o644},
		{notices, 0o644},
		{"/usr/share/doc/mcp-reconnect/README.md", 0o644},
	}
	for _, p := range manPages {
		out = append(out, packageFile{"/usr/share/man/man1/" + p + ".gz", 0o644})
	}
	return out
}

// checkPackageBinary checks a package's binary: the release binary byte
// for byte; run when it is this machine's, else of its OS and CPU.
func checkPackageBinary(t *testing.T, bin string, ti int, sums map[string]string, st stamp) {
	t.Helper()
	tg := targets[ti]
	if got, want := sha(t, bin), sums[assetName(tg.goos, tg.goarch)]; got != want {
		t.Errorf("the package's binary has sha256 %s, the release binary %s", got, want)
	}
	if tg.goos == runtime.GOOS && tg.goarch == runtime.GOARCH {
		out, err := exec.Command(bin, "version").Output()
		if err != nil || !strings.HasPrefix(string(out), "mcp-reconnect "+st.version+"\n") {
			t.Errorf("the package's binary: version printed %q (%v), want %s", out, err, st.version)
		}
	} else {
		checkArch(t, bin, tg.elf, tg.macho)
	}
}

// dpkgDeb is dpkg-deb (Debian's dpkg), required under CI, else optional.
func dpkgDeb(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("dpkg-deb")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("dpkg-deb missing under CI=true (apt-get install dpkg): %v", err)
		}
		t.Skipf("dpkg-deb missing: %v", err)
	}
	return p
}

// The .deb of each linux target, as dpkg-deb reads it: its fields (name,
// version, architecture, maintainer, homepage); its files (dpkg-deb -c)
// with their modes, owned by root, at the commit's time; unpacked
// (dpkg-deb -x), the release binary that runs or is of its CPU, the user
// unit the service package renders for /usr/bin/mcp-reconnect, the
// licence in Debian's copyright file and the notices beside it; this machine's CPU's installed and
// removed by dpkg in a root of its own.
func TestDebs(t *testing.T) {
	dir := distDir(t)
	dpkg := dpkgDeb(t)
	root := repoRoot(t)
	st := hostStamp(t, dir)
	commitTime, err := time.Parse(time.RFC3339, st.date)
	if err != nil {
		t.Fatal(err)
	}
	sums := readSums(t, dir)
	wantUnit, err := service.PackageUnit("/usr/bin/mcp-reconnect")
	if err != nil {
		t.Fatal(err)
	}
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	notices := archiveNotices(t, dir)
	for _, ti := range linuxTargets() {
		tg := targets[ti]
		name := assetName(tg.goos, tg.goarch) + ".deb"
		t.Run(name, func(t *testing.T) {
			deb := filepath.Join(dir, name)
			run := func(args ...string) string {
				t.Helper()
				cmd := exec.Command(dpkg, args...)
				cmd.Env = append(os.Environ(), "TZ=UTC")
				out, err := cmd.Output()
				if err != nil {
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						t.Fatalf("dpkg-deb %v: %v\n%s", args, err, ee.Stderr)
					}
					t.Fatalf("dpkg-deb %v: %v", args, err)
				}
				return string(out)
			}
			fields := map[string]string{}
			for _, line := range strings.Split(run("-f", deb), "\n") {
				if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
					fields[k] = v
				}
			}
			for k, want := range map[string]string{
				"Package": "mcp-reconnect", "Version": packageVersion(st.version, "deb"), "Architecture": tg.goarch,
				"Maintainer": setting("PACKAGE_MAINTAINER"), "Homepage": setting("SOURCE_URL"),
				"Description": "Keeps the MCP servers of an OpenCode server connected",
			} {
				if fields[k] != want {
					t.Errorf("field %s: %q, want %q", k, fields[k], want)
				}
			}
			listed := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(run("-c", deb)), "\n") {
				f := strings.Fields(line)
				if len(f) < 6 {
					t.Fatalf("dpkg-deb -c line %q", line)
				}
				path := strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")
				listed[path] = f[0]
				if f[1] != "root/root" || f[3]+" "+f[4] != commitTime.UTC().Format("2006-01-02 15:04") {
					t.Errorf("%s: owner %s time %s %s, want root/root at the commit's time", path, f[1], f[3], f[4])
				}
			}
			for _, pf := range packageFiles("deb") {
				if got, want := listed[pf.path], pf.mode.String(); got != want {
					t.Errorf("%s: %q, want %s", pf.path, got, want)
				}
			}
			unpacked := t.TempDir()
			run("-x", deb, unpacked)
			checkPackageBinary(t, filepath.Join(unpacked, "usr", "bin", "mcp-reconnect"), ti, sums, st)
			if b, err := os.ReadFile(filepath.Join(unpacked, service.PackageUnitDir, service.UnitName)); err != nil || !bytes.Equal(b, wantUnit) {
				t.Errorf("the unit (%v):\n%s\nwant service.PackageUnit's:\n%s", err, b, wantUnit)
			}
			c, err := os.ReadFile(filepath.Join(unpacked, "usr", "share", "doc", "mcp-reconnect", "copyright"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(c, []byte("\nLicense: "+setting("LICENSE_SPDX")+"\n")) || !bytes.Contains(c, []byte(" Permission is hereby granted")) || !bytes.Contains(license, []byte("Permission is hereby granted")) {
				t.Errorf("copyright does not give the licence:\n%s", c)
			}
			if b, err := os.ReadFile(filepath.Join(unpacked, "usr", "share", "doc", "mcp-reconnect", noticesFile)); err != nil || !bytes.Equal(b, notices) {
				t.Errorf("the notices are not the release's (%v)", err)
			}
			if tg.goarch == runtime.GOARCH {
				checkDpkgInstall(t, deb, ti, sums, st)
			}
		})
	}
}

// checkDpkgInstall has dpkg itself install the .deb into a root of its
// own (not this machine's) and remove it again: dpkg takes its fields and
// files, the installed binary runs, and removing leaves nothing behind.
func checkDpkgInstall(t *testing.T, deb string, ti int, sums map[string]string, st stamp) {
	t.Helper()
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skipf("dpkg missing: %v", err)
	}
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(dpkg, append([]string{"--root=" + root, "--force-not-root", "--force-script-chrootless", "--log=/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("-i", deb)
	if status := run("-s", "mcp-reconnect"); !strings.Contains(status, "Status: install ok installed") {
		t.Errorf("dpkg -s after install:\n%s", status)
	}
	checkPackageBinary(t, filepath.Join(root, "usr", "bin", "mcp-reconnect"), ti, sums, st)
	if _, err := os.Stat(filepath.Join(root, service.PackageUnitDir, service.UnitName)); err != nil {
		t.Errorf("the unit is not installed: %v", err)
	}
	run("-r", "mcp-reconnect")
	if _, err := os.Stat(filepath.Join(root, "usr")); !os.IsNotExist(err) {
		t.Errorf("removing left %s/usr behind (%v)", root, err)
	}
}

// rpmArch is the .rpm's name for a GOARCH.
var rpmArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

// The .rpm of each linux target, read by a Go RPM library (no rpm tool is
// needed): its digests verify; its header's name, version, release,
// architecture, licence, URL and packager; its files with their modes,
// owned by root, at the commit's time, the licence and the notices flagged
// %license and the README %doc; from its payload, the release binary that
// runs or is of its CPU, the unit the service package renders and the
// notices.
func TestRPMs(t *testing.T) {
	dir := distDir(t)
	st := hostStamp(t, dir)
	commitTime, err := time.Parse(time.RFC3339, st.date)
	if err != nil {
		t.Fatal(err)
	}
	sums := readSums(t, dir)
	wantUnit, err := service.PackageUnit("/usr/bin/mcp-reconnect")
	if err != nil {
		t.Fatal(err)
	}
	notices := archiveNotices(t, dir)
	noticesPath := "/usr/share/licenses/mcp-reconnect/" + noticesFile
	for _, ti := range linuxTargets() {
		tg := targets[ti]
		name := assetName(tg.goos, tg.goarch) + ".rpm"
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := rpmutils.Verify(bytes.NewReader(raw), nil); err != nil {
				t.Fatalf("the digests do not verify: %v", err)
			}
			rpm, err := rpmutils.ReadRpm(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			for tag, want := range map[int]string{
				rpmutils.NAME: "mcp-reconnect", rpmutils.VERSION: packageVersion(st.version, "rpm"), rpmutils.RELEASE: "1",
				rpmutils.ARCH: rpmArch[tg.goarch], rpmutils.LICENSE: setting("LICENSE_SPDX"), rpmutils.URL: setting("SOURCE_URL"),
				rpmutils.PACKAGER: setting("PACKAGE_MAINTAINER"), rpmutils.SUMMARY: "Keeps the MCP servers of an OpenCode server connected",
			} {
				if got, err := rpm.Header.GetString(tag); err != nil || got != want {
					t.Errorf("tag %d: %q (%v), want %q", tag, got, err, want)
				}
			}
			files, err := rpm.Header.GetFiles()
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]rpmutils.FileInfo{}
			for _, f := range files {
				byName[f.Name()] = f
				if f.UserName() != "root" || f.GroupName() != "root" || int64(f.Mtime()) != commitTime.Unix() {
					t.Errorf("%s: owner %s:%s mtime %d, want root:root at %d", f.Name(), f.UserName(), f.GroupName(), f.Mtime(), commitTime.Unix())
				}
			}
			for _, pf := range packageFiles("rpm") {
				f, ok := byName[pf.path]
				if !ok {
					t.Errorf("no %s in %v", pf.path, files)
					continue
				}
				if got, want := os.FileMode(f.Mode()&0o7777), pf.mode; got != want || f.Mode()&0o170000 != 0o100000 {
					t.Errorf("%s: mode %o, want a regular file %o", pf.path, f.Mode(), want)
				}
			}
			for _, l := range []string{"/usr/share/licenses/mcp-reconnect/LICENSE", noticesPath} {
				if f := byName[l]; f == nil || f.Flags()&rpmutils.RPMFILE_LICENSE == 0 {
					t.Errorf("%s is not flagged as the package's licence (RPMFILE_LICENSE)", l)
				}
			}
			if f := byName["/usr/share/doc/mcp-reconnect/README.md"]; f == nil || f.Flags()&rpmutils.RPMFILE_DOC == 0 {
				t.Error("README.md is not flagged as documentation (RPMFILE_DOC)")
			}
			pr, err := rpm.PayloadReaderExtended()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]byte{}
			for {
				f, err := pr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if f.Name() == "/usr/bin/mcp-reconnect" || f.Name() == service.PackageUnitDir+"/"+service.UnitName || f.Name() == noticesPath {
					b, err := io.ReadAll(bufio.NewReader(pr))
					if err != nil {
						t.Fatal(err)
					}
					got[f.Name()] = b
				}
			}
			if !bytes.Equal(got[service.PackageUnitDir+"/"+service.UnitName], wantUnit) {
				t.Errorf("the unit:\n%s\nwant service.PackageUnit's:\n%s", got[service.PackageUnitDir+"/"+service.UnitName], wantUnit)
			}
			if !bytes.Equal(got[noticesPath], notices) {
				t.Error("the notices are not the release's")
			}
			bin := filepath.Join(t.TempDir(), "mcp-reconnect")
			if err := os.WriteFile(bin, got["/usr/bin/mcp-reconnect"], 0o755); err != nil {
				t.Fatal(err)
			}
			checkPackageBinary(t, bin, ti, sums, st)
		})
	}
}
