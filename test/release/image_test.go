package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-reconnect/mcp-reconnect/internal/opencode/fakeopencode"
)

const imageArchive = "mcp-reconnect-image.oci.tar"

// ociDescriptor, ociIndex, ociManifest and ociConfig are the parts of the
// OCI image spec the checks read, decoded here with the standard library
// alone (not with the builder's library).
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []ociDescriptor   `json:"manifests"`
	Annotations   map[string]string `json:"annotations"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string    `json:"os"`
	Architecture string    `json:"architecture"`
	Created      time.Time `json:"created"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// archive is the OCI archive's files, name → content.
type archive map[string][]byte

func readArchive(t *testing.T, path string, mtime time.Time) archive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := archive{}
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(mtime) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("archive entry %s: mtime %v owner %d:%d, want the commit's time and 0:0", h.Name, h.ModTime.UTC(), h.Uid, h.Gid)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			a[h.Name] = b
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("archive entries are not sorted: %v", names)
	}
	return a
}

// blob returns the content d points at, checking its digest and size.
func (a archive) blob(t *testing.T, d ociDescriptor) []byte {
	t.Helper()
	hexSum, ok := strings.CutPrefix(d.Digest, "sha256:")
	b, found := a["blobs/sha256/"+hexSum]
	if !ok || !found {
		t.Fatalf("no blob %s in the archive", d.Digest)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexSum || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: sha256 %x, %d bytes; the descriptor says %d", d.Digest, sum, len(b), d.Size)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// The release's image, read from the archive as any OCI tool would: a
// layout (oci-layout, index.json) naming one multi-arch index of two
// images, linux/amd64 and linux/arm64, every blob matching its digest;
// each image's one layer holds that platform's release binary, byte for
// byte (same sha256 as in SHA256SUMS), at the entrypoint's path; it runs
// as a numeric non-root user; its labels name the source, version,
// revision, licenses and creation time (the commit's, as every time in
// the archive and the layers); the layer holds LICENSE and the notices
// in /usr/share/doc/mcp-reconnect.
func TestImage(t *testing.T) {
	dir := distDir(t)
	st := hostStamp(t, dir)
	sums := readSums(t, dir)
	if got := sums[imageArchive]; got == "" || got != sha(t, filepath.Join(dir, imageArchive)) {
		t.Errorf("SHA256SUMS says %q for %s, the file is %s", got, imageArchive, sha(t, filepath.Join(dir, imageArchive)))
	}
	commitTime, err := time.Parse(time.RFC3339, st.date)
	if err != nil {
		t.Fatal(err)
	}
	license, err := os.ReadFile(filepath.Join(repoRoot(t), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	wantDocs := map[string][]byte{"usr/share/doc/mcp-reconnect/LICENSE": license, "usr/share/doc/mcp-reconnect/" + noticesFile: archiveNotices(t, dir)}
	a := readArchive(t, filepath.Join(dir, imageArchive), commitTime)
	var lay struct {
		Version string `json:"imageLayoutVersion"`
	}
	if decode(t, a["oci-layout"], &lay); lay.Version != "1.0.0" {
		t.Errorf("oci-layout = %q", a["oci-layout"])
	}
	var top ociIndex
	decode(t, a["index.json"], &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json names %+v, want one image index", top.Manifests)
	}
	if got := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != st.version {
		t.Errorf("ref.name %q, want %s", got, st.version)
	}
	if got, want := top.Manifests[0].Annotations["io.containerd.image.name"], setting("IMAGE_REPO")+":"+st.version; got != want {
		t.Errorf("image name %q, want %s", got, want)
	}
	var idx ociIndex
	decode(t, a.blob(t, top.Manifests[0]), &idx)
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   setting("SOURCE_URL"),
		"org.opencontainers.image.version":  st.version,
		"org.opencontainers.image.revision": st.commit,
		"org.opencontainers.image.licenses": setting("LICENSE_SPDX"),
		"org.opencontainers.image.created":  st.date,
	}
	for k, v := range wantLabels {
		if idx.Annotations[k] != v {
			t.Errorf("index annotation %s = %q, want %q", k, idx.Annotations[k], v)
		}
	}
	var platforms []string
	for _, d := range idx.Manifests {
		if d.Platform == nil || d.MediaType != "application/vnd.oci.image.manifest.v1+json" {
			t.Fatalf("index entry %+v", d)
		}
		plat := d.Platform.OS + "/" + d.Platform.Architecture
		platforms = append(platforms, plat)
		t.Run(strings.ReplaceAll(plat, "/", "-"), func(t *testing.T) {
			var m ociManifest
			decode(t, a.blob(t, d), &m)
			var cf ociConfig
			decode(t, a.blob(t, m.Config), &cf)
			if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture || !cf.Created.Equal(commitTime) {
				t.Errorf("config: %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
			}
			uid, gid, ok := strings.Cut(cf.Config.User, ":")
			if n, err := strconv.Atoi(uid); !ok || err != nil || n == 0 {
				t.Errorf("user %q: want a numeric non-root uid:gid", cf.Config.User)
			} else if g, err := strconv.Atoi(gid); err != nil || g == 0 {
				t.Errorf("user %q: want a numeric non-root gid", cf.Config.User)
			}
			if strings.Join(cf.Config.Entrypoint, " ") != "/usr/local/bin/mcp-reconnect watch" || len(cf.Config.Cmd) != 0 {
				t.Errorf("entrypoint %q cmd %q, want [/usr/local/bin/mcp-reconnect watch] and no cmd", cf.Config.Entrypoint, cf.Config.Cmd)
			}
			for k, v := range wantLabels {
				if cf.Config.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
				}
			}
			for _, e := range cf.Config.Env {
				if strings.Contains(strings.ToUpper(e), "PASSWORD") {
					t.Errorf("the image's environment sets %q", e)
				}
			}
			if len(m.Layers) != 1 || len(cf.RootFS.DiffIDs) != 1 {
				t.Fatalf("%d layers, %d diff_ids: want one", len(m.Layers), len(cf.RootFS.DiffIDs))
			}
			zr, err := gzip.NewReader(bytes.NewReader(a.blob(t, m.Layers[0])))
			if err != nil {
				t.Fatal(err)
			}
			layer, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(layer); "sha256:"+hex.EncodeToString(sum[:]) != cf.RootFS.DiffIDs[0] {
				t.Errorf("diff_id %s is not the layer's", cf.RootFS.DiffIDs[0])
			}
			asset := "mcp-reconnect-" + d.Platform.OS + "-" + d.Platform.Architecture
			tr := tar.NewReader(bytes.NewReader(layer))
			var names []string
			found := false
			docs := map[string][]byte{}
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, h.Name)
				if !h.ModTime.Equal(commitTime) {
					t.Errorf("layer entry %s: mtime %v", h.Name, h.ModTime.UTC())
				}
				if h.Name == "usr/local/bin/mcp-reconnect" {
					b, _ := io.ReadAll(tr)
					sum := sha256.Sum256(b)
					if got := hex.EncodeToString(sum[:]); got != sums[asset] {
						t.Errorf("the image's binary has sha256 %s; %s has %s", got, asset, sums[asset])
					}
					if h.Mode&0o111 == 0 || h.Uid != 0 {
						t.Errorf("the binary: mode %o owner %d", h.Mode, h.Uid)
					}
					found = true
				}
				if _, ok := wantDocs[h.Name]; ok {
					docs[h.Name], _ = io.ReadAll(tr)
				}
			}
			for n, want := range wantDocs {
				if !bytes.Equal(docs[n], want) {
					t.Errorf("the layer's /%s is not the release's", n)
				}
			}
			if !found {
				t.Errorf("the layer has no /usr/local/bin/mcp-reconnect: %v", names)
			}
			if !sort.StringsAreSorted(names) {
				t.Errorf("layer entries are not sorted: %v", names)
			}
		})
	}
	if strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("platforms %v, want linux/amd64 linux/arm64", platforms)
	}
}

// hostImage returns the config and the layer of this machine's platform
// in the release's image.
func hostImage(t *testing.T, dir string, commitTime time.Time) (ociConfig, []byte) {
	t.Helper()
	a := readArchive(t, filepath.Join(dir, imageArchive), commitTime)
	var top, idx ociIndex
	decode(t, a["index.json"], &top)
	decode(t, a.blob(t, top.Manifests[0]), &idx)
	for _, d := range idx.Manifests {
		if d.Platform.OS != runtime.GOOS || d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		var m ociManifest
		decode(t, a.blob(t, d), &m)
		var cf ociConfig
		decode(t, a.blob(t, m.Config), &cf)
		zr, err := gzip.NewReader(bytes.NewReader(a.blob(t, m.Layers[0])))
		if err != nil {
			t.Fatal(err)
		}
		layer, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return cf, layer
	}
	t.Skipf("the image has no %s/%s", runtime.GOOS, runtime.GOARCH)
	return ociConfig{}, nil
}

// unpack writes a layer into root with its modes and owners.
func unpack(t *testing.T, layer []byte, root string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, _ := io.ReadAll(tr)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("layer entry %s of type %c", h.Name, h.Typeflag)
		}
		if err := os.Chown(p, h.Uid, h.Gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, os.FileMode(h.Mode).Perm()|modeBits(h.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}

func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// The image runs: its layer unpacked as the root of a process (chroot)
// that runs as the image's user with the image's environment and working
// directory, its entrypoint watches a fake OpenCode until GET /readyz
// answers 200, and registers itself in its home, which its user can
// write. It needs root to chroot (CI is); elsewhere it skips.
func TestImageRuns(t *testing.T) {
	dir := distDir(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root so that the image can be run in a chroot; this run is not root")
		}
		t.Skip("running the image's root file system needs root (chroot)")
	}
	st := hostStamp(t, dir)
	commitTime, _ := time.Parse(time.RFC3339, st.date)
	cf, layer := hostImage(t, dir, commitTime)
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	unpack(t, layer, root)

	fake := fakeopencode.New(map[string]fakeopencode.Spec{"docs": {}})
	fake.Password = "image-secret-pw"
	fake.SetHeartbeat(time.Second)
	oc := httptest.NewServer(fake)
	defer func() {
		oc.CloseClientConnections()
		oc.Close()
	}()
	// The password as a container gets it: a file only the image's user
	// can read.
	uid, gid, _ := strings.Cut(cf.Config.User, ":")
	u, _ := strconv.Atoi(uid)
	g, _ := strconv.Atoi(gid)
	if err := os.MkdirAll(filepath.Join(root, "run", "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(root, "run", "secrets", "opencode_password")
	if err := os.WriteFile(pw, []byte("image-secret-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pw, u, g); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	statusAddr := ln.Addr().String()
	ln.Close()

	args := append(append([]string(nil), cf.Config.Entrypoint[1:]...), "--url", oc.URL, "--password-file", "/run/secrets/opencode_password", "--status-addr", statusAddr)
	cmd := exec.Command(cf.Config.Entrypoint[0], args...)
	cmd.Path = cf.Config.Entrypoint[0] // resolved inside the chroot
	cmd.Env = cf.Config.Env
	cmd.Dir = "/"
	if wd := cf.Config.WorkingDir; wd != "" {
		cmd.Dir = wd
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uint32(u), Gid: uint32(g)}}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("running the image's entrypoint in %s: %v", root, err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if strings.Contains(logs.String(), "image-secret-pw") {
			t.Error("the password reached the output")
		}
	}()
	c := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get("http://" + statusAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image's daemon never became ready: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ents, err := os.ReadDir(filepath.Join(root, strings.TrimPrefix(homeOf(cf), "/"), ".local", "state", "mcp-reconnect", "daemons"))
	if err != nil || len(ents) == 0 {
		t.Errorf("the daemon did not register in its home (%v):\n%s", err, logs.String())
	}
}

func homeOf(cf ociConfig) string {
	for _, e := range cf.Config.Env {
		if h, ok := strings.CutPrefix(e, "HOME="); ok {
			return h
		}
	}
	return "/"
}
