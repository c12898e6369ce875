package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func binary(name, goos string, deps ...*debug.Module) Binary {
	return Binary{Name: name, OS: goos, Arch: "amd64", SHA256: strings.Repeat("a", 64), Info: &debug.BuildInfo{
		GoVersion: "go1.26.8", Path: "github.com/mcp-reconnect/mcp-reconnect/cmd/mcp-reconnect",
		Main: debug.Module{Path: "github.com/mcp-reconnect/mcp-reconnect", Version: "(devel)"}, Deps: deps,
	}}
}

func opts() Options {
	cobra := &debug.Module{Path: "github.com/spf13/cobra", Version: "v1.10.2", Sum: "h1:abc="}
	sys := &debug.Module{Path: "golang.org/x/sys", Version: "v0.48.0", Sum: "h1:def="}
	pty := &debug.Module{Path: "github.com/creack/pty", Version: "v1.1.24", Replace: &debug.Module{Path: "example.com/pty", Version: "v1.1.25", Sum: "h1:ghi="}}
	return Options{Version: "v1.2.3", Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Homepage: "https://github.com/mcp-reconnect/mcp-reconnect",
		ReleaseURL: "https://github.com/mcp-reconnect/mcp-reconnect/releases/download/", License: "MIT",
		Binaries: []Binary{binary("mcp-reconnect-linux-amd64", "linux", cobra, sys, pty), binary("mcp-reconnect-darwin-amd64", "darwin", cobra, sys)}}
}

// The document: SPDX 2.3, named and placed after the release, created at
// the commit's time; each binary described with its SHA-256, built from
// the main module (MIT) and statically linking each module of its build
// record (a replacement in its place) and the standard library.
func TestWrite(t *testing.T) {
	b, err := Write(opts())
	if err != nil {
		t.Fatal(err)
	}
	var doc document
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.CreationInfo.Created != "2026-12-01T10:00:00Z" ||
		doc.DocumentNamespace != "https://github.com/mcp-reconnect/mcp-reconnect/releases/download/v1.2.3/mcp-reconnect.spdx.json" {
		t.Errorf("document: %+v", doc)
	}
	ids := map[string]pkg{}
	valid := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	for _, p := range doc.Packages {
		if !valid.MatchString(p.SPDXID) {
			t.Errorf("invalid SPDX id %q", p.SPDXID)
		}
		if _, dup := ids[p.SPDXID]; dup {
			t.Errorf("id %s twice", p.SPDXID)
		}
		ids[p.SPDXID] = p
	}
	main := ids["SPDXRef-Module-github.com-mcp-reconnect-mcp-reconnect"]
	if main.VersionInfo != "v1.2.3" || main.LicenseDeclared != "MIT" || main.ExternalRefs[0].ReferenceLocator != "pkg:golang/github.com/mcp-reconnect/mcp-reconnect@v1.2.3" {
		t.Errorf("main module: %+v", main)
	}
	linux := ids["SPDXRef-Binary-mcp-reconnect-linux-amd64"]
	if linux.Checksums[0].Algorithm != "SHA256" || linux.Checksums[0].ChecksumValue != strings.Repeat("a", 64) ||
		linux.DownloadLocation != "https://github.com/mcp-reconnect/mcp-reconnect/releases/download/v1.2.3/mcp-reconnect-linux-amd64" {
		t.Errorf("linux binary: %+v", linux)
	}
	rel := map[string]bool{}
	for _, r := range doc.Relationships {
		rel[r.SPDXElementID+" "+r.RelationshipType+" "+r.RelatedSPDXElement] = true
		if _, ok := ids[r.RelatedSPDXElement]; !ok {
			t.Errorf("relationship to %s, which is not in the document", r.RelatedSPDXElement)
		}
	}
	for _, want := range []string{
		"SPDXRef-DOCUMENT DESCRIBES SPDXRef-Binary-mcp-reconnect-linux-amd64",
		"SPDXRef-DOCUMENT DESCRIBES SPDXRef-Binary-mcp-reconnect-darwin-amd64",
		"SPDXRef-Binary-mcp-reconnect-linux-amd64 GENERATED_FROM SPDXRef-Module-github.com-mcp-reconnect-mcp-reconnect",
		"SPDXRef-Binary-mcp-reconnect-linux-amd64 STATIC_LINK SPDXRef-Module-github.com-spf13-cobra-v1.10.2",
		"SPDXRef-Binary-mcp-reconnect-linux-amd64 STATIC_LINK SPDXRef-Module-example.com-pty-v1.1.25",
		"SPDXRef-Binary-mcp-reconnect-linux-amd64 STATIC_LINK SPDXRef-Module-stdlib-go1.26.8",
		"SPDXRef-Binary-mcp-reconnect-darwin-amd64 STATIC_LINK SPDXRef-Module-golang.org-x-sys-v0.48.0",
	} {
		if !rel[want] {
			t.Errorf("no relationship %s", want)
		}
	}
	if rel["SPDXRef-Binary-mcp-reconnect-darwin-amd64 STATIC_LINK SPDXRef-Module-example.com-pty-v1.1.25"] || ids["SPDXRef-Module-github.com-creack-pty-v1.1.24"].SPDXID != "" {
		t.Error("a module a binary does not link, or a replaced one, is listed")
	}
	if p := ids["SPDXRef-Module-github.com-spf13-cobra-v1.10.2"]; p.Comment != "go.sum h1:abc=" || p.ExternalRefs[0].ReferenceLocator != "pkg:golang/github.com/spf13/cobra@v1.10.2" {
		t.Errorf("cobra: %+v", p)
	}
}

// The same binaries, given in another order, give the same bytes.
func TestWriteIsReproducible(t *testing.T) {
	a, err := Write(opts())
	if err != nil {
		t.Fatal(err)
	}
	o := opts()
	o.Binaries[0], o.Binaries[1] = o.Binaries[1], o.Binaries[0]
	b, err := Write(o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the order of the binaries changed the document")
	}
}

func TestWriteRefuses(t *testing.T) {
	o := opts()
	o.Binaries[1].Info.Main.Path = "example.com/other"
	if _, err := Write(o); err == nil {
		t.Error("a binary of another module was described")
	}
	o = opts()
	o.License = ""
	if _, err := Write(o); err == nil {
		t.Error("no licence")
	}
}
