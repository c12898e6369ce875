package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options say what to build.
type Options struct {
	// Out is the OCI archive written.
	Out string
	// Binaries are the static linux binaries, one image each.
	Binaries []Binary
	// Version, Revision, Source and Licenses become the OCI labels
	// org.opencontainers.image.version, .revision, .source, .licenses.
	Version, Revision, Source, Licenses string
	// Created is every timestamp in the image (the commit's time).
	Created time.Time
	// Name is the image's repository, for io.containerd.image.name
	// (REPO:VERSION), which `docker load` tags it with; "" leaves it out.
	Name string
	// LicenseText and Notices are the project's LICENSE and the licences
	// of the Go modules the binary links (THIRD_PARTY_NOTICES), shipped
	// in DocDir.
	LicenseText, Notices []byte
}

// Binary is one platform's binary.
type Binary struct {
	Arch string // GOARCH: amd64, arm64
	Path string
}

// The image's fixed layout.
const (
	// BinaryPath is where the binary lives in the image.
	BinaryPath = "/usr/local/bin/mcp-reconnect"
	// UID and GID run the daemon: not root, and the number distroless
	// images call nonroot, so a PodSecurity "restricted" policy
	// (runAsNonRoot) accepts it without a name lookup.
	UID, GID = 65532, 65532
	// Home is the user's home: the registry of running daemons lives in
	// its state directory, and a config file may be mounted under its
	// .config (or anywhere, with --config).
	Home = "/home/nonroot"
	// DocDir holds LICENSE and THIRD_PARTY_NOTICES, where the .deb has
	// them.
	DocDir = "/usr/share/doc/mcp-reconnect"
)

// Labels are the OCI labels of opts.
func (o Options) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "mcp-reconnect",
		"org.opencontainers.image.description": "Keeps the MCP servers of an OpenCode server connected",
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.url":         o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.licenses":    o.Licenses,
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
	}
}

func (o Options) validate() error {
	switch {
	case o.Out == "":
		return errors.New("--out is missing")
	case len(o.Binaries) == 0:
		return errors.New("no binaries: give linux/ARCH=BINARY for each platform")
	case o.Version == "" || o.Revision == "" || o.Source == "" || o.Licenses == "":
		return errors.New("--version, --revision, --source and --licenses are all needed (they are the image's labels)")
	case o.Created.IsZero():
		return errors.New("--created is missing")
	case len(o.LicenseText) == 0 || len(o.Notices) == 0:
		return errors.New("--license-file and --notices are needed: the image ships them")
	}
	seen := map[string]bool{}
	for _, b := range o.Binaries {
		if seen[b.Arch] {
			return fmt.Errorf("linux/%s given twice", b.Arch)
		}
		seen[b.Arch] = true
	}
	return nil
}

// Build writes the archive.
func Build(o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	bins := append([]Binary(nil), o.Binaries...)
	sort.Slice(bins, func(i, j int) bool { return bins[i].Arch < bins[j].Arch })
	for _, b := range bins {
		img, err := platformImage(o, b)
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: b.Arch},
		}})
	}
	idx = mutate.Annotations(idx, o.Labels()).(v1.ImageIndex)

	dir, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// index.json names the one multi-arch image, as `docker buildx
	// --output type=oci` writes it: ref.name is its tag, the containerd
	// name what `docker load` tags it as.
	ann := map[string]string{"org.opencontainers.image.ref.name": o.Version}
	if o.Name != "" {
		ann["io.containerd.image.name"] = o.Name + ":" + o.Version
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(ann)); err != nil {
		return err
	}
	return writeTar(dir, o.Out, o.Created)
}

// platformImage is the image of one binary: one layer on nothing.
func platformImage(o Options, b Binary) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	layerTar, err := o.rootfs(bin)
	if err != nil {
		return nil, err
	}
	gz, err := gzipped(layerTar)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: o.Created.UTC()}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created: created, CreatedBy: "mcp-reconnect release: mcp-reconnect-linux-" + b.Arch + " as " + BinaryPath,
		Comment: "static binary, non-root user " + fmt.Sprint(UID),
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", b.Arch, created
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint: []string{BinaryPath, "watch"},
		Env:        []string{"HOME=" + Home, "PATH=/usr/local/bin"},
		WorkingDir: Home,
		Labels:     o.Labels(),
		// The status API, when given --status-addr 0.0.0.0:4097
		// --status-public (the default listens on loopback only).
		ExposedPorts: map[string]struct{}{"4097/tcp": {}},
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the layer: the binary, a passwd and group naming the user
// (for tools that look it up), its home, /tmp, and the licences.
func (o Options) rootfs(bin []byte) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, GID, Home)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		body     []byte // nil: a directory
	}
	entries := []entry{
		{"etc/", 0o755, 0, 0, nil},
		{"etc/group", 0o644, 0, 0, []byte(group)},
		{"etc/passwd", 0o644, 0, 0, []byte(passwd)},
		{"home/", 0o755, 0, 0, nil},
		{strings.TrimPrefix(Home, "/") + "/", 0o700, UID, GID, nil},
		{"tmp/", 0o1777, 0, 0, nil},
		{"usr/", 0o755, 0, 0, nil},
		{"usr/local/", 0o755, 0, 0, nil},
		{"usr/local/bin/", 0o755, 0, 0, nil},
		{strings.TrimPrefix(BinaryPath, "/"), 0o755, 0, 0, bin},
		{"usr/share/", 0o755, 0, 0, nil},
		{"usr/share/doc/", 0o755, 0, 0, nil},
		{strings.TrimPrefix(DocDir, "/") + "/", 0o755, 0, 0, nil},
		{strings.TrimPrefix(DocDir, "/") + "/LICENSE", 0o644, 0, 0, o.LicenseText},
		{strings.TrimPrefix(DocDir, "/") + "/THIRD_PARTY_NOTICES", 0o644, 0, 0, o.Notices},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: o.Created.UTC(), Format: tar.FormatPAX}
		if e.body == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipped compresses b with no name and no time in the header.
func gzipped(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeTar packs the layout directory into out: entries sorted, owned by
// 0:0, files 0644 and directories 0755, every time mtime.
func writeTar(dir, out string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: mtime.UTC(), Format: tar.FormatPAX}
		var body []byte
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		} else {
			if body, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(n))); err != nil {
				return err
			}
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
