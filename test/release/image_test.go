package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
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
// the archive and the layers).
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

// rebuildImage builds the image again with tools/ociimage of the checkout
// at root, from the release's binaries and the settings its labels
// record, into a temporary file, and returns its sha256.
func rebuildImage(t *testing.T, root, dir string, st stamp) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), imageArchive)
	args := []string{"run", "./tools/ociimage", "--out", out, "--version", st.version, "--revision", st.commit, "--created", st.date,
		"--source", setting("SOURCE_URL"), "--licenses", setting("LICENSE_SPDX"), "--name", setting("IMAGE_REPO")}
	for _, arch := range []string{"amd64", "arm64"} {
		args = append(args, fmt.Sprintf("linux/%s=%s", arch, filepath.Join(dir, "mcp-reconnect-linux-"+arch)))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v in %s: %v\n%s", args, root, err, b)
	}
	return sha(t, out)
}
