package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

const noticesFile = "THIRD_PARTY_NOTICES"

// archiveNotices is THIRD_PARTY_NOTICES as the first target's archive
// holds it: every other archive, package, the image and the npm packages
// must hold the same bytes.
func archiveNotices(t *testing.T, dir string) []byte {
	t.Helper()
	name := assetName(targets[0].goos, targets[0].goarch)
	f, err := os.Open(filepath.Join(dir, name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s.tar.gz has no %s", name, noticesFile)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name+"/"+noticesFile {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// noticeHeading is a module's heading in the notices: its path and
// version between two rules.
var noticeHeading = regexp.MustCompile(`(?m)^={80}\n(\S+) (\S+)\n={80}\n`)

// The notices name every module the SBOM says a binary links, the Go
// standard library too, at its version, and nothing else; each with at
// least one licence file (LICENSE, COPYING) reproduced; no path of the
// machine that built it. The archives, packages, image and npm packages
// each hold these bytes (checked where each is opened).
func TestNotices(t *testing.T) {
	dir := distDir(t)
	notices := archiveNotices(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, sbomFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Packages []struct{ Name, VersionInfo, PrimaryPackagePurpose string }
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, p := range doc.Packages {
		if p.PrimaryPackagePurpose == "LIBRARY" {
			want[p.Name+" "+p.VersionInfo] = true
		}
	}
	bi, err := buildinfo.ReadFile(filepath.Join(dir, assetName(targets[0].goos, targets[0].goarch)))
	if err != nil {
		t.Fatal(err)
	}
	if !want["stdlib "+bi.GoVersion] || len(want) < 2 {
		t.Errorf("the SBOM lists %v: want stdlib %s and the modules", want, bi.GoVersion)
	}
	sections := noticeHeading.FindAllSubmatchIndex(notices, -1)
	got := map[string]bool{}
	for i, m := range sections {
		mod := string(notices[m[2]:m[3]]) + " " + string(notices[m[4]:m[5]])
		got[mod] = true
		end := len(notices)
		if i+1 < len(sections) {
			end = sections[i+1][0]
		}
		body := notices[m[1]:end]
		if !regexp.MustCompile(`(?mi)^--- (licen[cs]e|copying|unlicense)`).Match(body) {
			t.Errorf("%s: no licence file in its section:\n%s", mod, body)
		}
	}
	for m := range want {
		if !got[m] {
			t.Errorf("%s is linked (the SBOM says) but the notices do not name it", m)
		}
	}
	for m := range got {
		if !want[m] {
			t.Errorf("the notices name %s, which the SBOM does not list", m)
		}
	}
	for _, p := range localPaths(t, repoRoot(t)) {
		if bytes.Contains(notices, []byte(p)) {
			t.Errorf("the notices name the local path %s", p)
		}
	}
}
