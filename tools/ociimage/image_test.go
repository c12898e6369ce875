package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

var created = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func options(t *testing.T, dir string) Options {
	t.Helper()
	var bins []Binary
	for _, arch := range []string{"arm64", "amd64"} {
		p := filepath.Join(dir, "mcp-reconnect-linux-"+arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		bins = append(bins, Binary{Arch: arch, Path: p})
	}
	return Options{Out: filepath.Join(dir, "image.oci.tar"), Binaries: bins, Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567",
		Source: "https://github.com/mcp-reconnect/mcp-reconnect", Licenses: "NOASSERTION", Created: created, Name: "ghcr.io/mcp-reconnect/mcp-reconnect",
		LicenseText: []byte("MIT License\n"), Notices: []byte("notices\n")}
}

// The same inputs give the same bytes, wherever they are and whenever the
// build runs (file times of the inputs, temporary directories).
func TestBuildIsReproducible(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	oa, ob := options(t, a), options(t, b)
	if err := os.Chtimes(ob.Binaries[0].Path, time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := Build(oa); err != nil {
		t.Fatal(err)
	}
	if err := Build(ob); err != nil {
		t.Fatal(err)
	}
	ba, _ := os.ReadFile(oa.Out)
	bb, _ := os.ReadFile(ob.Out)
	if !bytes.Equal(ba, bb) {
		t.Fatal("two builds of the same inputs differ")
	}
}

// The archive is a valid OCI layout (every digest and size checks out,
// ggcr's validate), holding one index of one image per platform, each of
// the binary given, with the licence and the notices.
func TestBuildIsAValidLayout(t *testing.T) {
	dir := t.TempDir()
	o := options(t, dir)
	if err := Build(o); err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	untar(t, o.Out, lay)
	top, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" ||
		m.Manifests[0].Annotations["io.containerd.image.name"] != "ghcr.io/mcp-reconnect/mcp-reconnect:v1.2.3" {
		t.Fatalf("index.json = %+v", m)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 || im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("platforms %+v", im.Manifests)
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 2 || cf.Config.Entrypoint[1] != "watch" || !cf.Created.Time.Equal(created) {
			t.Errorf("%s config %+v", d.Platform.Architecture, cf.Config)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers %v %v", layers, err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		found := false
		docs := map[string]string{}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !h.ModTime.Equal(created) {
				t.Errorf("%s: mtime %v", h.Name, h.ModTime)
			}
			if h.Name == "usr/local/bin/mcp-reconnect" {
				b, _ := io.ReadAll(tr)
				want, _ := os.ReadFile(filepath.Join(dir, "mcp-reconnect-linux-"+d.Platform.Architecture))
				found = sha256.Sum256(b) == sha256.Sum256(want) && h.Mode == 0o755
			}
			if strings.HasPrefix(h.Name, "usr/share/doc/mcp-reconnect/") && h.Typeflag == tar.TypeReg {
				b, _ := io.ReadAll(tr)
				docs[h.Name] = string(b)
			}
		}
		rc.Close()
		if !found {
			t.Errorf("%s: the layer lacks linux/%s's binary at %s", d.Platform.Architecture, d.Platform.Architecture, BinaryPath)
		}
		if docs["usr/share/doc/mcp-reconnect/LICENSE"] != "MIT License\n" || docs["usr/share/doc/mcp-reconnect/THIRD_PARTY_NOTICES"] != "notices\n" {
			t.Errorf("%s: the licences in the layer: %q", d.Platform.Architecture, docs)
		}
	}
}

func TestBuildRefusesIncompleteOptions(t *testing.T) {
	o := options(t, t.TempDir())
	o.Revision = ""
	if err := Build(o); err == nil {
		t.Fatal("built without a revision label")
	}
	o = options(t, t.TempDir())
	o.Binaries = append(o.Binaries, o.Binaries[0])
	if err := Build(o); err == nil {
		t.Fatal("built two images of one platform")
	}
}

func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
