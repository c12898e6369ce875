package private

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestEnsureDirMakesItPrivateAndRefusesWhatIsNotADirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	if err := EnsureDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDir(dir); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, want 0700", fi.Mode())
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDir(link); err == nil {
		t.Fatal("a symbolic link was taken for the directory")
	}
}

func TestWriteFileIsPrivateAndReadFileRefusesWhatOthersCouldWrite(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(dir, "f.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f.json")
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode())
	}
	if b, err := ReadFile(p, 10); err != nil || string(b) != "{}" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := ReadFile(p, 1); err == nil {
		t.Fatal("a file over the limit was read")
	}
	for _, mode := range []os.FileMode{0o604, 0o620, 0o640} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(p, 10); !errors.Is(err, ErrNotPrivate) {
			t.Errorf("mode %v: %v, want ErrNotPrivate", mode, err)
		}
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(link, 10); err == nil {
		t.Fatal("a symbolic link was followed")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("a temporary file was left behind: %v", ents)
	}
}

// Open names the file in every refusal, refuses a FIFO without blocking on
// it, applies the Trust, and lets a missing file be told apart.
func TestOpenRefusesWhatIsNotARegularTrustedFile(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Own.Open("password file", filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Own.Open("password file", fifo); err == nil || err.Error() != "password file "+fifo+" is not a regular file" {
		t.Fatalf("fifo: %v", err)
	}
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Own.Open("password file", file); !errors.Is(err, ErrReadable) {
		t.Fatalf("a file others can read: %v, want ErrReadable", err)
	}
	f, fi, err := Trust{UID: -1, Readable: true}.Open("environment file", file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fi.Size() != 6 {
		t.Fatalf("size %d, want 6", fi.Size())
	}
}
