package release

import (
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The SBOM: an SPDX 2.3 document, created at the commit's time (its only
// time) and published beside the assets; it describes each release binary
// with the sha256 SHA256SUMS gives it, built from mcp-reconnect under its
// licence, and linking every module the binary's own build record lists,
// at that version, and the Go standard library.
func TestSBOM(t *testing.T) {
	dir := distDir(t)
	st := hostStamp(t, dir)
	sums := readSums(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, sbomFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion, DataLicense, DocumentNamespace string
		CreationInfo                                struct{ Created string }
		Packages                                    []struct {
			SPDXID, Name, VersionInfo, DownloadLocation, LicenseDeclared string
			Checksums                                                    []struct{ Algorithm, ChecksumValue string }
		}
		Relationships []struct{ SPDXElementID, RelationshipType, RelatedSPDXElement string }
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.CreationInfo.Created != st.date ||
		doc.DocumentNamespace != setting("RELEASE_URL")+"/"+st.version+"/"+sbomFile {
		t.Errorf("document %s %s created %s namespace %s", doc.SPDXVersion, doc.DataLicense, doc.CreationInfo.Created, doc.DocumentNamespace)
	}
	byID := map[string]int{}
	for i, p := range doc.Packages {
		byID[p.SPDXID] = i
	}
	rel := map[string]bool{}
	for _, r := range doc.Relationships {
		from, to := doc.Packages[byID[r.SPDXElementID]].Name, doc.Packages[byID[r.RelatedSPDXElement]]
		if r.SPDXElementID == "SPDXRef-DOCUMENT" {
			from = "DOCUMENT"
		}
		rel[from+" "+r.RelationshipType+" "+to.Name+"@"+to.VersionInfo] = true
	}
	for _, tg := range targets {
		name := assetName(tg.goos, tg.goarch)
		var found bool
		for _, p := range doc.Packages {
			if p.Name != name {
				continue
			}
			found = true
			if len(p.Checksums) != 1 || p.Checksums[0].Algorithm != "SHA256" || p.Checksums[0].ChecksumValue != sums[name] ||
				p.VersionInfo != st.version || p.DownloadLocation != setting("RELEASE_URL")+"/"+st.version+"/"+name {
				t.Errorf("%s: %+v", name, p)
			}
		}
		if !found || !rel["DOCUMENT DESCRIBES "+name+"@"+st.version] {
			t.Errorf("the SBOM does not describe %s", name)
			continue
		}
		bi, err := buildinfo.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !rel[name+" GENERATED_FROM "+bi.Main.Path+"@"+st.version] || !rel[name+" STATIC_LINK stdlib@"+bi.GoVersion] {
			t.Errorf("%s: not built from %s %s with %s", name, bi.Main.Path, st.version, bi.GoVersion)
		}
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			if !rel[name+" STATIC_LINK "+d.Path+"@"+d.Version] {
				t.Errorf("%s links %s %s, the SBOM does not say so", name, d.Path, d.Version)
			}
		}
	}
	for _, p := range doc.Packages {
		if p.Name == "github.com/mcp-reconnect/mcp-reconnect" && p.LicenseDeclared != setting("LICENSE_SPDX") {
			t.Errorf("mcp-reconnect's licence in the SBOM: %s", p.LicenseDeclared)
		}
	}
	if strings.Count(string(b), `"created"`) != 1 {
		t.Error("the SBOM holds more than the one creation time")
	}
}
