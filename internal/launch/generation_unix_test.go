//go:build unix

package launch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The generation switch stays correct when the binary is upgraded (the
// cache must not give stale answers). Version
// managers (asdf, mise, volta) put one shim on PATH for every version and
// pick the version per project (.tool-versions, mise.toml, package.json),
// so the same file answers `--version` differently in two directories.
// Versions keys the answer on the file alone, so the generation learned in
// the first project is used in every other: a project pinned to OpenCode 2
// is wrapped by 1.x's rules (and the other way round).
func TestVersionShimPerProjectIsAskedAgain(t *testing.T) {
	bin := t.TempDir()
	shim := filepath.Join(bin, "opencode")
	// asdf's shims are scripts like this one: the version comes from the
	// project the command runs in.
	script := "#!/bin/sh\nif [ -f .tool-versions ]; then echo 'opencode 2.0.21'; else echo '1.18.34'; fi\n"
	if err := os.WriteFile(shim, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	v := &Versions{File: filepath.Join(t.TempDir(), "cache", "opencode-versions.json"), Ask: askVersion}

	old := t.TempDir()
	t.Chdir(old)
	if major, _, err := v.Major(context.Background(), shim, nil); err != nil || major != 1 {
		t.Fatalf("setup: in a project without a pin: major %d, %v", major, err)
	}
	pinned := t.TempDir()
	if err := os.WriteFile(filepath.Join(pinned, ".tool-versions"), []byte("opencode 2.0.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(pinned)
	if major, cached, err := v.Major(context.Background(), shim, nil); err != nil || major != 2 {
		t.Fatalf("in a project pinned to OpenCode 2, major %d (cached %v, %v): `%s --version` there says 2.0.21, the answer remembered for the shim in another project was used", major, cached, err, shim)
	}
}
