package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Options say what to build.
type Options struct {
	// Out is the directory written into.
	Out string
	// Binaries are the release binaries, one archive each, and a .deb and
	// an .rpm for each linux one.
	Binaries []Binary
	// Version is the release's (v1.2.3, or a Go pseudo-version).
	Version string
	// Created is every time in the archives and packages (the commit's).
	Created time.Time
	// Homepage, License (SPDX) and Maintainer are the packages' metadata.
	Homepage, License, Maintainer string
	// LicenseText and Readme are LICENSE and README.md, shipped as they are.
	LicenseText, Readme []byte
	// Notices are the licences of the Go modules the binaries link
	// (THIRD_PARTY_NOTICES, written by tools/sbom), shipped beside LICENSE.
	Notices []byte
	// Docs are the completions and manual pages (GenerateDocs).
	Docs Docs
}

// Binary is one platform's binary.
type Binary struct {
	OS, Arch string // GOOS, GOARCH
	Path     string
}

// Name is the stem every asset of the binary is named by:
// mcp-reconnect-OS-ARCH (.tar.gz, .deb, .rpm), as the bare binary is.
func (b Binary) Name() string { return "mcp-reconnect-" + b.OS + "-" + b.Arch }

// BinaryName is the command's name wherever it is installed.
const BinaryName = "mcp-reconnect"

func (o Options) validate() error {
	switch {
	case o.Out == "":
		return errors.New("--out is missing")
	case len(o.Binaries) == 0:
		return errors.New("no binaries: give OS/ARCH=BINARY for each platform")
	case o.Version == "" || o.Homepage == "" || o.License == "" || o.Maintainer == "":
		return errors.New("--version, --homepage, --license and --maintainer are all needed (they are the packages' metadata)")
	case o.Created.IsZero():
		return errors.New("--created is missing")
	case len(o.LicenseText) == 0 || len(o.Readme) == 0 || len(o.Notices) == 0:
		return errors.New("the LICENSE, README.md and THIRD_PARTY_NOTICES to ship are missing")
	}
	seen := map[string]bool{}
	for _, b := range o.Binaries {
		if seen[b.Name()] {
			return fmt.Errorf("%s/%s given twice", b.OS, b.Arch)
		}
		seen[b.Name()] = true
	}
	return o.Docs.validate()
}

// NoticesFile is the name the notices are shipped as.
const NoticesFile = "THIRD_PARTY_NOTICES"

// Build writes every archive and package, and the npm packages, and
// returns their paths.
func Build(o Options) ([]string, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	bins := append([]Binary(nil), o.Binaries...)
	sort.Slice(bins, func(i, j int) bool { return bins[i].Name() < bins[j].Name() })
	var written []string
	for _, b := range bins {
		bin, err := os.ReadFile(b.Path)
		if err != nil {
			return nil, err
		}
		out := filepath.Join(o.Out, b.Name()+".tar.gz")
		if err := writeFile(out, func() ([]byte, error) { return o.tarGz(o.archiveEntries(b, bin)) }); err != nil {
			return nil, err
		}
		written = append(written, out)
		if b.OS != "linux" {
			continue
		}
		for _, format := range []string{"deb", "rpm"} {
			out := filepath.Join(o.Out, b.Name()+"."+format)
			if err := writeFile(out, func() ([]byte, error) { return o.linuxPackage(format, b, bin) }); err != nil {
				return nil, err
			}
			written = append(written, out)
		}
	}
	npm, err := o.npmPackages(bins, func(b Binary) ([]byte, error) { return os.ReadFile(b.Path) })
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(npm))
	for name := range npm {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		out := filepath.Join(o.Out, name)
		if err := writeFile(out, func() ([]byte, error) { return npm[name], nil }); err != nil {
			return nil, err
		}
		written = append(written, out)
	}
	return written, nil
}

// writeFile writes what make returns through a temporary file, so a failed
// build leaves no half an asset.
func writeFile(out string, make func() ([]byte, error)) error {
	b, err := make()
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(out), err)
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// entry is one file or directory of an archive.
type entry struct {
	name string // slash-separated; a directory ends in "/"
	mode fs.FileMode
	body []byte
}

// archiveEntries are the archive's files under its top directory: the
// binary, LICENSE, THIRD_PARTY_NOTICES, README.md, completions/ and
// man/man1/, as the formula installs them.
func (o Options) archiveEntries(b Binary, bin []byte) []entry {
	top := b.Name() + "/"
	files := []entry{
		{top + BinaryName, 0o755, bin},
		{top + "LICENSE", 0o644, o.LicenseText},
		{top + NoticesFile, 0o644, o.Notices},
		{top + "README.md", 0o644, o.Readme},
	}
	for _, s := range Shells {
		files = append(files, entry{top + s.Archive, 0o644, o.Docs.Completions[s.Shell]})
	}
	for _, name := range o.Docs.manPages() {
		files = append(files, entry{top + "man/man1/" + name, 0o644, o.Docs.Man[name]})
	}
	return withDirs(files)
}

// withDirs adds the directories the files are in, each once, and sorts.
func withDirs(files []entry) []entry {
	seen := map[string]bool{}
	out := append([]entry(nil), files...)
	for _, f := range files {
		for d := path.Dir(f.name); d != "." && d != "/"; d = path.Dir(d) {
			if !seen[d] {
				seen[d] = true
				out = append(out, entry{name: d + "/", mode: 0o755})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// tarGz is a .tar.gz of entries (withDirs' order): owned by 0:0, every
// time the commit's; gzip without name or time. A name given twice is an
// error.
func (o Options) tarGz(entries []entry) ([]byte, error) {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for i, e := range entries {
		if i > 0 && entries[i-1].name == e.name {
			return nil, fmt.Errorf("%s given twice", e.name)
		}
		h := &tar.Header{Name: e.name, Mode: int64(e.mode.Perm()), ModTime: o.Created.UTC()}
		if strings.HasSuffix(e.name, "/") {
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
	return gzipped(tb.Bytes())
}

// gzipped compresses b with no name and no time in the header, as
// `gzip -9n` does.
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
