package launch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// countingVersions is a cache in a temp dir whose --version is answered
// by what the binary's file says, counting the questions.
func countingVersions(t *testing.T) (*Versions, *int) {
	t.Helper()
	n := new(int)
	v := &Versions{File: filepath.Join(t.TempDir(), "cache", "mcp-reconnect", "opencode-versions.json"),
		Ask: func(_ context.Context, path string, _ []string) (string, error) {
			*n++
			b, err := os.ReadFile(path)
			return string(b), err
		}}
	return v, n
}

func writeBinary(t *testing.T, path, version string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(version), 0o755); err != nil {
		t.Fatal(err)
	}
}

func wantMajor(t *testing.T, v *Versions, asked *int, command string, major int, cached bool, questions int) {
	t.Helper()
	got, gotCached, err := v.Major(context.Background(), command, nil)
	if err != nil || got != major || gotCached != cached || *asked != questions {
		t.Fatalf("Major(%s) = %d, cached %v, %v after %d questions; want %d, cached %v, %d questions", command, got, gotCached, err, *asked, major, cached, questions)
	}
}

// The generation is asked once per binary and remembered while the file
// is the same one; a new file in its place (an upgrade), even of the same
// size and modification time, is asked again.
func TestVersionsRememberedPerBinary(t *testing.T) {
	v, asked := countingVersions(t)
	bin := filepath.Join(t.TempDir(), "opencode")
	writeBinary(t, bin, "1.18.34\n")
	wantMajor(t, v, asked, bin, 1, false, 1)
	wantMajor(t, v, asked, bin, 1, true, 1)

	fi, _ := os.Stat(bin)
	time.Sleep(10 * time.Millisecond) // a change time of its own
	writeBinary(t, bin+".new", "2.0.21\n")
	if err := os.Chtimes(bin+".new", fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	wantMajor(t, v, asked, bin, 2, false, 2)
	wantMajor(t, v, asked, bin, 2, true, 2)

	// Rewritten in place, same size, same mtime: the change time differs.
	time.Sleep(10 * time.Millisecond)
	f, err := os.OpenFile(bin, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteAt([]byte("1"), 0) // "1.0.21"
	f.Close()
	fi2, _ := os.Stat(bin)
	_ = os.Chtimes(bin, fi2.ModTime(), fi.ModTime())
	wantMajor(t, v, asked, bin, 1, false, 3)

	for path, want := range map[string]os.FileMode{v.File: 0o600, filepath.Dir(v.File): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
}

// `opencode` on PATH is often a symlink into a versioned directory: the
// answer belongs to the file it points to, and re-pointing it asks again.
func TestVersionsFollowSymlinks(t *testing.T) {
	v, asked := countingVersions(t)
	dir := t.TempDir()
	writeBinary(t, filepath.Join(dir, "v1", "opencode"), "1.18.34")
	writeBinary(t, filepath.Join(dir, "v2", "opencode"), "2.0.21")
	link := filepath.Join(dir, "bin", "opencode")
	_ = os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(filepath.Join(dir, "v1", "opencode"), link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(link))
	wantMajor(t, v, asked, "opencode", 1, false, 1)
	wantMajor(t, v, asked, "opencode", 1, true, 1)
	_ = os.Remove(link)
	if err := os.Symlink(filepath.Join(dir, "v2", "opencode"), link); err != nil {
		t.Fatal(err)
	}
	wantMajor(t, v, asked, "opencode", 2, false, 2)
}

// An npm shim can stay byte for byte the same across an upgrade (npm
// keeps the package's mtimes): every npm install rewrites the tree's
// node_modules/.package-lock.json, and that asks again.
func TestVersionsNoticeAnNpmUpgrade(t *testing.T) {
	v, asked := countingVersions(t)
	mods := filepath.Join(t.TempDir(), "node_modules")
	shim := filepath.Join(mods, "opencode-ai", "bin", "opencode")
	writeBinary(t, shim, "1.18.34")
	lock := filepath.Join(mods, ".package-lock.json")
	if err := os.WriteFile(lock, []byte(`{"v":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wantMajor(t, v, asked, shim, 1, false, 1)
	wantMajor(t, v, asked, shim, 1, true, 1)
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(lock, []byte(`{"v":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wantMajor(t, v, asked, shim, 1, false, 2)
}

// A cache file others could write is not believed.
func TestVersionsIgnoreAWritableCache(t *testing.T) {
	v, asked := countingVersions(t)
	bin := filepath.Join(t.TempDir(), "opencode")
	writeBinary(t, bin, "1.18.34")
	wantMajor(t, v, asked, bin, 1, false, 1)
	if err := os.Chmod(v.File, 0o666); err != nil {
		t.Fatal(err)
	}
	wantMajor(t, v, asked, bin, 1, false, 2)
}

// Whatever the cache file holds, Major answers what the binary says or
// what was remembered for exactly this binary, and never fails for it.
func FuzzVersionsFile(f *testing.F) {
	f.Add([]byte(`[{"path":"/x","id":"size 1","major":2}]`))
	f.Add([]byte(`[{"id":null,"major":-1}]`))
	f.Add([]byte(`not json`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, asked := countingVersions(t)
		bin := filepath.Join(t.TempDir(), "opencode")
		writeBinary(t, bin, "1.18.34")
		if err := os.MkdirAll(filepath.Dir(v.File), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(v.File, b, 0o600); err != nil {
			t.Fatal(err)
		}
		wantMajor(t, v, asked, bin, 1, false, 1)
		wantMajor(t, v, asked, bin, 1, true, 1)
	})
}
