package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	makeDefault = regexp.MustCompile(`(?m)^([A-Z_]+) \?= (.*)$`)
	scriptDef   = regexp.MustCompile(`(?m)^([A-Z_]+)=\$\{[A-Z_]+:-(.*)\}$`)
	// An image reference in a registry that names mcp-reconnect.
	imageRef = regexp.MustCompile(`\b(?:ghcr\.io|docker\.io|quay\.io|registry\.[a-z0-9.-]+)/[A-Za-z0-9._/-]*mcp-reconnect\b`)
	// A tap in a brew command: brew install OWNER/NAME/FORMULA, brew tap OWNER/NAME.
	brewTap = regexp.MustCompile(`brew (?:install|reinstall|upgrade|tap) ([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)`)
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// One name for the image and one for the Homebrew tap, the Makefile's,
// wherever they are named: the README, the examples, the release
// script's defaults, the formula's template, and these tests. The release
// script's other defaults are the Makefile's too.
func TestOneNameForTheImageAndTheTap(t *testing.T) {
	mk := map[string]string{}
	for _, m := range makeDefault.FindAllStringSubmatch(read(t, "Makefile"), -1) {
		mk[m[1]] = strings.TrimSpace(m[2])
	}
	image, tap := mk["IMAGE_REPO"], mk["BREW_TAP"]
	if image == "" || tap == "" {
		t.Fatalf("the Makefile names no IMAGE_REPO or BREW_TAP: %v", mk)
	}
	if imageRepo != image {
		t.Errorf("these tests run the image %s, the Makefile releases %s", imageRepo, image)
	}
	script := read(t, "scripts/release.sh")
	defs := scriptDef.FindAllStringSubmatch(script, -1)
	if len(defs) < 5 {
		t.Fatalf("read %d defaults in scripts/release.sh", len(defs))
	}
	for _, m := range defs {
		want, ok := mk[m[1]]
		if !ok {
			t.Errorf("scripts/release.sh has a default for %s, the Makefile none", m[1])
			continue
		}
		want = strings.ReplaceAll(want, "$(SOURCE_URL)", "$SOURCE_URL")
		if m[2] != want {
			t.Errorf("scripts/release.sh defaults %s to %q, the Makefile to %q", m[1], m[2], want)
		}
	}
	files := []string{"README.md", "scripts/release.sh", "tools/brewformula/formula.rb.tmpl"}
	err := filepath.WalkDir(filepath.Join("..", "..", "examples"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(filepath.Join("..", ".."), p)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var images, taps int
	for _, f := range files {
		text := read(t, f)
		for _, ref := range imageRef.FindAllString(text, -1) {
			images++
			if ref != image {
				t.Errorf("%s names the image %s, the release's is %s", f, ref, image)
			}
		}
		for _, m := range brewTap.FindAllStringSubmatch(text, -1) {
			taps++
			if m[1] != tap {
				t.Errorf("%s names the tap %s, the release's is %s", f, m[1], tap)
			}
		}
	}
	if images < 3 || taps < 1 {
		t.Errorf("found %d image and %d tap references: the patterns no longer match the files", images, taps)
	}
	if tmpl := read(t, "tools/brewformula/formula.rb.tmpl"); !strings.Contains(tmpl, "brew install {{.Tap}}/mcp-reconnect") {
		t.Error("the formula's template no longer names its tap")
	}
}
