package examples

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	specRow  = regexp.MustCompile(`(?m)^\| (\d+)\. [^|]+\|([^|]*)\|([^|]*)\|$`)
	specFile = regexp.MustCompile("`((?:internal|cmd)/[^` ]+)`")
	specTest = regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")
	goTest   = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
)

// docs/spec.md names, for each of the thirteen rules, the files that
// enforce it and the tests that hold it: every one must exist, so the
// table cannot drift from the code it maps.
func TestSpecNamesFilesAndTestsThatExist(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "spec.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range goTest.FindAllSubmatch(b, -1) {
				tests[string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := specRow.FindAllStringSubmatch(string(doc), -1)
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r[1]] = true
		files, named := specFile.FindAllStringSubmatch(r[2], -1), specTest.FindAllStringSubmatch(r[3], -1)
		if len(files) == 0 || len(named) == 0 {
			t.Errorf("rule %s: its row names %d files and %d tests; want both", r[1], len(files), len(named))
		}
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(root, f[1])); err != nil {
				t.Errorf("rule %s names %s: %v", r[1], f[1], err)
			}
		}
		for _, n := range named {
			if !tests[n[1]] {
				t.Errorf("rule %s names %s: no such test", r[1], n[1])
			}
		}
	}
	for i := 1; i <= 13; i++ {
		if !seen[strconv.Itoa(i)] {
			t.Errorf("rule %d has no row in docs/spec.md", i)
		}
	}
}
