// Command brewformula writes the Homebrew formula of a release, for a tap
// (Formula/mcp-reconnect.rb): its version and licence, the URL and sha256
// (from SHA256SUMS) of the release archive of each OS and CPU
// (mcp-reconnect-OS-ARCH.tar.gz, tools/distpkg), an install of what the
// archive holds (the binary, already 0755; the completions and manual
// pages the binary wrote at release time), a service block so that `brew
// services start mcp-reconnect` keeps `mcp-reconnect watch` on (a refused
// duplicate exiting 0, which launchd does not restart), and a test
// block. scripts/release.sh runs it; it is a release tool, not part of the
// binary users run.
//
//	go run ./brewformula --sums dist/SHA256SUMS --out dist/mcp-reconnect.rb \
//	  --version v1.2.3 --commit COMMIT --release-url URL --homepage URL \
//	  --tap mcp-reconnect/tap [--license SPDX]
package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"text/template"

	"github.com/mcp-reconnect/mcp-reconnect/internal/service"
)

//go:embed formula.rb.tmpl
var formulaText string

var formula = template.Must(template.New("formula").Parse(formulaText))

// Options say what to write.
type Options struct {
	// Version is the release's (v1.2.3); the formula's is without the v.
	Version string
	// Commit is the commit it was built from, named in a comment.
	Commit string
	// ReleaseURL is the base of the assets' URLs:
	// ReleaseURL/Version/mcp-reconnect-OS-ARCH.tar.gz.
	ReleaseURL string
	// Homepage is the project's page.
	Homepage string
	// License is an SPDX identifier; "" or NOASSERTION leaves it out.
	License string
	// Tap is the tap the formula is published in (OWNER/NAME, the
	// repository OWNER/homebrew-NAME), named in its install line.
	Tap string
	// Sums maps asset name → sha256 (SHA256SUMS).
	Sums map[string]string
}

// Asset is one release archive in the formula.
type Asset struct{ URL, SHA256 string }

// platforms are the formula's OS and CPU blocks, by Homebrew's names.
var platforms = []struct{ os, cpu, goos, goarch string }{
	{"macos", "arm", "darwin", "arm64"},
	{"macos", "intel", "darwin", "amd64"},
	{"linux", "arm", "linux", "arm64"},
	{"linux", "intel", "linux", "amd64"},
}

// safe is what may stand inside a Ruby double-quoted string unescaped
// ("#", "\" and quotes would not).
var safe = regexp.MustCompile(`^[A-Za-z0-9._~:/?&=+%@,-]*$`)

// tapName is a tap as `brew tap` takes it: OWNER/NAME.
var tapName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Write renders the formula.
func Write(o Options) ([]byte, error) {
	for name, v := range map[string]string{"--version": o.Version, "--commit": o.Commit, "--release-url": o.ReleaseURL, "--homepage": o.Homepage, "--license": o.License} {
		if !safe.MatchString(v) {
			return nil, fmt.Errorf("%s %q holds characters a formula cannot quote plainly", name, v)
		}
	}
	if o.Version == "" || o.Commit == "" || o.ReleaseURL == "" || o.Homepage == "" {
		return nil, errors.New("--version, --commit, --release-url and --homepage are all needed")
	}
	if !tapName.MatchString(o.Tap) {
		return nil, fmt.Errorf("--tap %q: want OWNER/NAME (brew tap OWNER/NAME)", o.Tap)
	}
	data := struct {
		Options
		FormulaVersion string
		VersionPrefix  string           // "v" when the release's version has it: `version` prints it
		Assets         map[string]Asset // "macos/arm" → asset
		// DuplicateExitEnv is set to 0 in the service: launchd
		// restarts a job after any other status.
		DuplicateExitEnv string
	}{Options: o, FormulaVersion: strings.TrimPrefix(o.Version, "v"), Assets: map[string]Asset{}, DuplicateExitEnv: service.DuplicateExitEnv}
	if data.FormulaVersion != o.Version {
		data.VersionPrefix = "v"
	}
	if data.License == "NOASSERTION" {
		data.License = ""
	}
	for _, p := range platforms {
		name := "mcp-reconnect-" + p.goos + "-" + p.goarch + ".tar.gz"
		sum, ok := o.Sums[name]
		if !ok {
			return nil, fmt.Errorf("SHA256SUMS has no %s: the formula needs all four archives (make release)", name)
		}
		data.Assets[p.os+"/"+p.cpu] = Asset{URL: strings.TrimSuffix(o.ReleaseURL, "/") + "/" + o.Version + "/" + name, SHA256: sum}
	}
	var b bytes.Buffer
	if err := formula.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var sumLine = regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)

// readSums parses SHA256SUMS ("<hex>  <name>" per line).
func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := sumLine.FindStringSubmatch(sc.Text())
		if m == nil {
			return nil, fmt.Errorf("%s: line %q is not \"SHA256  NAME\"", path, sc.Text())
		}
		sums[m[2]] = m[1]
	}
	return sums, sc.Err()
}

func main() {
	var o Options
	var sums, out string
	flag.StringVar(&sums, "sums", "dist/SHA256SUMS", "the release's SHA256SUMS")
	flag.StringVar(&out, "out", "dist/mcp-reconnect.rb", "the formula to write")
	flag.StringVar(&o.Version, "version", "", "the release version")
	flag.StringVar(&o.Commit, "commit", "", "the commit")
	flag.StringVar(&o.ReleaseURL, "release-url", "", "base of the release assets' URLs (URL/VERSION/mcp-reconnect-OS-ARCH.tar.gz)")
	flag.StringVar(&o.Tap, "tap", "", "the tap the formula is published in (OWNER/NAME)")
	flag.StringVar(&o.Homepage, "homepage", "", "the project's page")
	flag.StringVar(&o.License, "license", "", "SPDX license (NOASSERTION: none)")
	flag.Parse()
	var err error
	if o.Sums, err = readSums(sums); err == nil {
		var b []byte
		if b, err = Write(o); err == nil {
			err = os.WriteFile(out, b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "brewformula:", err)
		os.Exit(1)
	}
}
