package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// extractArchive unpacks a release archive into a temporary directory,
// with the modes it records, and returns its one top directory.
func extractArchive(t *testing.T, path string) string {
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
	root := t.TempDir()
	tops := map[string]bool{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("%s: entry %q outside the archive", path, h.Name)
		}
		tops[strings.SplitN(h.Name, "/", 2)[0]] = true
		p := filepath.Join(root, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: entry %s of type %c", path, h.Name, h.Typeflag)
		}
	}
	if len(tops) != 1 {
		t.Fatalf("%s has %d top directories, want one: %v", path, len(tops), tops)
	}
	for top := range tops {
		return filepath.Join(root, top)
	}
	return ""
}

// The archive of each target: one top directory named after the asset
// holding the binary (0755, the release binary byte for byte), the bash,
// zsh and fish completions, a manual page of each command, LICENSE and
// README.md as in the checkout, THIRD_PARTY_NOTICES (TestNotices); entries sorted, owned by 0:0, every time
// the commit's; nothing that names this machine's paths. This machine's
// binary runs from it and prints the release's version; the others are
// of their OS and CPU.
func TestArchives(t *testing.T) {
	dir := distDir(t)
	root := repoRoot(t)
	st := hostStamp(t, dir)
	commitTime, err := time.Parse(time.RFC3339, st.date)
	if err != nil {
		t.Fatal(err)
	}
	sums := readSums(t, dir)
	forbidden := localPaths(t, root)
	notices := archiveNotices(t, dir)
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		name := assetName(tg.goos, tg.goarch)
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".tar.gz")
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			if zr.Name != "" || !zr.ModTime.IsZero() {
				t.Errorf("gzip header names %q at %v: want neither", zr.Name, zr.ModTime)
			}
			tr := tar.NewReader(zr)
			modes := map[string]int64{}
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
				modes[h.Name] = h.Mode
				if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(commitTime) {
					t.Errorf("%s: owner %d:%d mtime %v, want 0:0 and the commit's time", h.Name, h.Uid, h.Gid, h.ModTime.UTC())
				}
				if h.Typeflag != tar.TypeReg {
					continue
				}
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				rel := strings.TrimPrefix(h.Name, name+"/")
				switch {
				case rel == "mcp-reconnect":
					if got := shaBytes(b); got != sums[name] {
						t.Errorf("the archive's binary has sha256 %s, %s has %s", got, name, sums[name])
					}
				case rel == "LICENSE" && !bytes.Equal(b, license), rel == "README.md" && !bytes.Equal(b, readme),
					rel == noticesFile && !bytes.Equal(b, notices):
					t.Errorf("%s is not the checkout's", rel)
				case strings.HasPrefix(rel, "completions/") || strings.HasPrefix(rel, "man/"):
					for _, p := range forbidden {
						if bytes.Contains(b, []byte(p)) {
							t.Errorf("%s names the local path %s", rel, p)
						}
					}
				}
			}
			if !sort.StringsAreSorted(names) {
				t.Errorf("entries are not sorted: %v", names)
			}
			top := name + "/"
			want := map[string]int64{top: 0o755, top + "mcp-reconnect": 0o755, top + "LICENSE": 0o644, top + "README.md": 0o644, top + noticesFile: 0o644,
				top + "completions/mcp-reconnect.bash": 0o644, top + "completions/_mcp-reconnect": 0o644, top + "completions/mcp-reconnect.fish": 0o644}
			for _, page := range manPages {
				want[top+"man/man1/"+page] = 0o644
			}
			for n, m := range want {
				if got, ok := modes[n]; !ok || got != m {
					t.Errorf("%s: mode %o (present: %v), want %o", n, got, ok, m)
				}
			}
			for _, n := range names {
				if !strings.HasPrefix(n, top) {
					t.Errorf("%s is outside %s", n, top)
				}
			}
			bin := filepath.Join(extractArchive(t, path), "mcp-reconnect")
			if tg.goos == runtime.GOOS && tg.goarch == runtime.GOARCH {
				out, err := exec.Command(bin, "version").Output()
				if err != nil || !strings.HasPrefix(string(out), "mcp-reconnect "+st.version+"\n") {
					t.Errorf("the archive's binary: version printed %q (%v), want %s", out, err, st.version)
				}
			} else {
				checkArch(t, bin, tg.elf, tg.macho)
			}
		})
	}
}

// manPages are pages every archive and package must hold: the command's
// and each subcommand's.
var manPages = []string{"mcp-reconnect.1", "mcp-reconnect-watch.1", "mcp-reconnect-run.1", "mcp-reconnect-status.1",
	"mcp-reconnect-reconnect.1", "mcp-reconnect-doctor.1", "mcp-reconnect-service.1", "mcp-reconnect-service-install.1",
	"mcp-reconnect-version.1", "mcp-reconnect-man.1", "mcp-reconnect-completion.1"}

func shaBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
