package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// Options say what the document describes.
type Options struct {
	// Version is the release's; the main module's version in the
	// binaries is "(devel)" (built from a checkout).
	Version string
	// Created is the document's creation time (the commit's).
	Created time.Time
	// Homepage is the repository, the main module's download location.
	Homepage string
	// ReleaseURL is the base of the assets' URLs; the document is
	// published at ReleaseURL/Version/DocumentName, its namespace.
	ReleaseURL string
	// License is the project's SPDX licence.
	License string
	// Binaries are the release binaries.
	Binaries []Binary
}

// Binary is one release binary and its build record.
type Binary struct {
	Name     string // the asset's name: mcp-reconnect-linux-amd64
	OS, Arch string
	SHA256   string
	Info     *debug.BuildInfo
}

// DocumentName is the file the document is published as.
const DocumentName = "mcp-reconnect.spdx.json"

// The parts of SPDX 2.3 (https://spdx.github.io/spdx-spec/v2.3/) written.
type (
	document struct {
		SPDXVersion       string         `json:"spdxVersion"`
		DataLicense       string         `json:"dataLicense"`
		SPDXID            string         `json:"SPDXID"`
		Name              string         `json:"name"`
		DocumentNamespace string         `json:"documentNamespace"`
		CreationInfo      creationInfo   `json:"creationInfo"`
		Packages          []pkg          `json:"packages"`
		Relationships     []relationship `json:"relationships"`
	}
	creationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	pkg struct {
		SPDXID                string        `json:"SPDXID"`
		Name                  string        `json:"name"`
		VersionInfo           string        `json:"versionInfo,omitempty"`
		Supplier              string        `json:"supplier,omitempty"`
		DownloadLocation      string        `json:"downloadLocation"`
		FilesAnalyzed         bool          `json:"filesAnalyzed"`
		Checksums             []checksum    `json:"checksums,omitempty"`
		LicenseConcluded      string        `json:"licenseConcluded"`
		LicenseDeclared       string        `json:"licenseDeclared"`
		CopyrightText         string        `json:"copyrightText"`
		Comment               string        `json:"comment,omitempty"`
		ExternalRefs          []externalRef `json:"externalRefs,omitempty"`
		PrimaryPackagePurpose string        `json:"primaryPackagePurpose,omitempty"`
	}
	checksum struct {
		Algorithm     string `json:"algorithm"`
		ChecksumValue string `json:"checksumValue"`
	}
	externalRef struct {
		ReferenceCategory string `json:"referenceCategory"`
		ReferenceType     string `json:"referenceType"`
		ReferenceLocator  string `json:"referenceLocator"`
	}
	relationship struct {
		SPDXElementID      string `json:"spdxElementId"`
		RelationshipType   string `json:"relationshipType"`
		RelatedSPDXElement string `json:"relatedSpdxElement"`
	}
)

const noAssertion = "NOASSERTION"

// idUnsafe is what an SPDX identifier may not hold (letters, digits, "."
// and "-" only).
var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, name string) string {
	return "SPDXRef-" + kind + "-" + idUnsafe.ReplaceAllString(name, "-")
}

func purl(path, version string) externalRef {
	return externalRef{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: "pkg:golang/" + path + "@" + version}
}

// module is one Go module some binary links, as its build record says.
type module struct{ path, version, sum string }

// Write renders the document.
func Write(o Options) ([]byte, error) {
	if o.Version == "" || o.Homepage == "" || o.ReleaseURL == "" || o.License == "" || o.Created.IsZero() {
		return nil, errors.New("--version, --created, --homepage, --release-url and --license are all needed")
	}
	if len(o.Binaries) == 0 {
		return nil, errors.New("no binaries: give OS/ARCH=BINARY for each release binary")
	}
	bins := append([]Binary(nil), o.Binaries...)
	sort.Slice(bins, func(i, j int) bool { return bins[i].Name < bins[j].Name })
	base := strings.TrimSuffix(o.ReleaseURL, "/") + "/" + o.Version + "/"
	mainPath := bins[0].Info.Main.Path
	mainID := spdxID("Module", mainPath)
	doc := document{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "mcp-reconnect " + o.Version,
		DocumentNamespace: base + DocumentName,
		CreationInfo: creationInfo{Created: o.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: the mcp-reconnect authors", "Tool: mcp-reconnect-tools-sbom"}},
	}
	doc.Packages = append(doc.Packages, pkg{
		SPDXID: mainID, Name: mainPath, VersionInfo: o.Version, Supplier: "Organization: the mcp-reconnect authors",
		DownloadLocation: o.Homepage, LicenseConcluded: o.License, LicenseDeclared: o.License, CopyrightText: noAssertion,
		ExternalRefs: []externalRef{purl(mainPath, o.Version)}, PrimaryPackagePurpose: "SOURCE",
	})
	modules := map[string]module{} // by SPDX id
	var rels []relationship
	for _, b := range bins {
		if b.Info == nil || b.Info.Main.Path != mainPath {
			return nil, fmt.Errorf("%s: not a build of %s", b.Name, mainPath)
		}
		id := spdxID("Binary", b.Name)
		doc.Packages = append(doc.Packages, pkg{
			SPDXID: id, Name: b.Name, VersionInfo: o.Version, Supplier: "Organization: the mcp-reconnect authors",
			DownloadLocation: base + b.Name, Checksums: []checksum{{"SHA256", b.SHA256}},
			// The binary holds its dependencies too, under their own
			// licences.
			LicenseConcluded: noAssertion, LicenseDeclared: o.License, CopyrightText: noAssertion,
			Comment:               fmt.Sprintf("%s/%s, built with %s", b.OS, b.Arch, b.Info.GoVersion),
			PrimaryPackagePurpose: "APPLICATION",
		})
		rels = append(rels,
			relationship{"SPDXRef-DOCUMENT", "DESCRIBES", id},
			relationship{id, "GENERATED_FROM", mainID})
		linked := []module{{"stdlib", b.Info.GoVersion, ""}}
		for _, d := range b.Info.Deps {
			m := d
			if d.Replace != nil {
				m = d.Replace
			}
			linked = append(linked, module{m.Path, m.Version, m.Sum})
		}
		for _, m := range linked {
			mid := spdxID("Module", m.path+"-"+m.version)
			modules[mid] = m
			rels = append(rels, relationship{id, "STATIC_LINK", mid})
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := modules[id]
		p := pkg{SPDXID: id, Name: m.path, VersionInfo: m.version, DownloadLocation: noAssertion,
			LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			ExternalRefs: []externalRef{purl(m.path, m.version)}, PrimaryPackagePurpose: "LIBRARY"}
		if m.sum != "" {
			p.Comment = "go.sum " + m.sum
		}
		doc.Packages = append(doc.Packages, p)
	}
	sort.SliceStable(rels, func(i, j int) bool {
		a, b := rels[i], rels[j]
		if a.SPDXElementID != b.SPDXElementID {
			return a.SPDXElementID < b.SPDXElementID
		}
		if a.RelationshipType != b.RelationshipType {
			return a.RelationshipType < b.RelationshipType
		}
		return a.RelatedSPDXElement < b.RelatedSPDXElement
	})
	doc.Relationships = rels
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
