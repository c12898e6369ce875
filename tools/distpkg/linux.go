package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"

	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
)

// The packages' fixed layout.
const (
	// PackageName is the .deb's and .rpm's name.
	PackageName = "mcp-reconnect"
	// PackageBinary is where the packages put the binary, and what their
	// unit runs.
	PackageBinary = "/usr/bin/" + BinaryName
	// DocDir holds README.md (and, in the .deb, copyright).
	DocDir = "/usr/share/doc/" + PackageName
	// RPMLicenseDir holds the .rpm's LICENSE (%license).
	RPMLicenseDir = "/usr/share/licenses/" + PackageName
	// ManDir holds the manual pages, compressed.
	ManDir = "/usr/share/man/man1"
)

// Summary is the packages' one-line description; Description the rest.
const (
	Summary     = "Keeps the MCP servers of an OpenCode server connected"
	Description = `OpenCode connects each MCP server once per project directory and gives up
for good when that fails or when a live connection drops. mcp-reconnect
watches an OpenCode server from the outside and brings failed MCP servers
back by itself: per directory, with backoff, within a connect budget,
without re-enabling servers you disabled. The package ships a systemd user
unit for every user: systemctl --user enable --now mcp-reconnect`
)

// pkgFile is one file of a package: where it goes, its mode and content,
// and its nfpm type (an .rpm's %license and %doc).
type pkgFile struct {
	dst  string
	mode fs.FileMode
	body []byte
	typ  string
}

// packageFiles are the files of the .deb (format "deb") or the .rpm.
func (o Options) packageFiles(format string, bin []byte) ([]pkgFile, error) {
	unit, err := service.PackageUnit(PackageBinary)
	if err != nil {
		return nil, err
	}
	out := []pkgFile{
		{PackageBinary, 0o755, bin, ""},
		{service.PackageUnitDir + "/" + service.UnitName, 0o644, unit, ""},
	}
	for _, s := range Shells {
		dst := s.Deb
		if format == "rpm" {
			dst = s.RPM
		}
		out = append(out, pkgFile{dst, 0o644, o.Docs.Completions[s.Shell], ""})
	}
	for _, name := range o.Docs.manPages() {
		gz, err := gzipped(o.Docs.Man[name])
		if err != nil {
			return nil, err
		}
		out = append(out, pkgFile{ManDir + "/" + name + ".gz", 0o644, gz, ""})
	}
	switch format {
	case "deb":
		// Debian keeps the licence in the package's copyright file
		// (machine-readable, DEP-5).
		c, err := o.debCopyright()
		if err != nil {
			return nil, err
		}
		// The linked modules' licences beside it (copyright names the file).
		out = append(out, pkgFile{DocDir + "/copyright", 0o644, c, ""}, pkgFile{DocDir + "/" + NoticesFile, 0o644, o.Notices, ""},
			pkgFile{DocDir + "/README.md", 0o644, o.Readme, ""})
	case "rpm":
		out = append(out,
			pkgFile{RPMLicenseDir + "/LICENSE", 0o644, o.LicenseText, files.TypeRPMLicense},
			pkgFile{RPMLicenseDir + "/" + NoticesFile, 0o644, o.Notices, files.TypeRPMLicense},
			pkgFile{DocDir + "/README.md", 0o644, o.Readme, files.TypeRPMDoc})
	}
	return out, nil
}

// debCopyright is /usr/share/doc/mcp-reconnect/copyright in Debian's
// machine-readable format: the LICENSE's copyright line and text under
// the project's SPDX licence.
func (o Options) debCopyright() ([]byte, error) {
	var holder string
	var text []string
	sc := bufio.NewScanner(bytes.NewReader(o.LicenseText))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t")
		if holder == "" {
			if h, ok := strings.CutPrefix(line, "Copyright "); ok {
				holder = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(h, "(c)"), "(C)"))
			}
			continue
		}
		text = append(text, line)
	}
	if holder == "" {
		return nil, fmt.Errorf("LICENSE has no line starting with \"Copyright \"")
	}
	var b strings.Builder
	b.WriteString("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
	fmt.Fprintf(&b, "Upstream-Name: %s\nSource: %s\n\nFiles: *\nCopyright: %s\nLicense: %s\n", PackageName, o.Homepage, holder, o.License)
	for _, line := range strings.Split(strings.Trim(strings.Join(text, "\n"), "\n"), "\n") {
		if line == "" {
			line = "."
		}
		b.WriteString(" " + line + "\n")
	}
	fmt.Fprintf(&b, "Comment: The binary links Go modules under their own licences: %s/%s\n", DocDir, NoticesFile)
	return []byte(b.String()), nil
}

// linuxPackage is the .deb or .rpm of b, built by nfpm from packageFiles.
func (o Options) linuxPackage(format string, b Binary, bin []byte) ([]byte, error) {
	pf, err := o.packageFiles(format, bin)
	if err != nil {
		return nil, err
	}
	// nfpm reads each file from disk: stage them, under names of no
	// meaning (the destination and mode are given).
	stage, err := os.MkdirTemp("", "distpkg-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	var contents files.Contents
	for i, f := range pf {
		src := filepath.Join(stage, fmt.Sprint(i))
		if err := os.WriteFile(src, f.body, 0o644); err != nil {
			return nil, err
		}
		contents = append(contents, &files.Content{Source: src, Destination: f.dst, Type: f.typ, FileInfo: o.fileInfo(f.mode)})
	}
	// The directories that are the package's own (not /usr/bin's).
	dirs := []string{DocDir}
	if format == "rpm" {
		dirs = append(dirs, RPMLicenseDir)
	}
	for _, d := range dirs {
		contents = append(contents, &files.Content{Destination: d, Type: files.TypeDir, FileInfo: o.fileInfo(0o755)})
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:        PackageName,
		Arch:        b.Arch,
		Platform:    "linux",
		Version:     o.Version,
		Section:     "utils",
		Priority:    "optional",
		Maintainer:  o.Maintainer,
		Homepage:    o.Homepage,
		License:     o.License,
		Description: Summary + "\n" + Description,
		MTime:       o.Created.UTC(),
		Overridables: nfpm.Overridables{
			Contents: contents,
			Deb:      nfpm.Deb{Compression: "gzip"},
			// The build host goes into the .rpm's header: not this
			// machine's name.
			RPM: nfpm.RPM{Compression: "gzip", Summary: Summary, Packager: o.Maintainer, BuildHost: "localhost"},
		},
	})
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return nil, err
	}
	var p nfpm.Packager = deb.Default
	if format == "rpm" {
		p = rpm.DefaultRPM
	}
	var buf bytes.Buffer
	if err := p.Package(info, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (o Options) fileInfo(mode fs.FileMode) *files.ContentFileInfo {
	return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: o.Created.UTC()}
}
