// Command sbom writes the software bill of materials of a release: one
// SPDX 2.3 JSON document (mcp-reconnect.spdx.json) describing each
// release binary (its SHA-256; the archives, packages and image carry
// these same bytes) as built from the mcp-reconnect module and statically
// linking the Go modules and the Go standard library its build record
// lists (debug/buildinfo: exactly what was compiled in, with versions and
// go.sum hashes; no test-only dependency).
//
// Reproducible: it reads only the binaries and its flags; the document's
// one time is the commit's (--created), its namespace the URL it is
// published at, and every list is sorted. The licences of the
// dependencies are NOASSERTION: the build record does not say them.
// With --notices it also writes THIRD_PARTY_NOTICES, the licences of
// those same modules (notices.go), which the release ships.
// scripts/release.sh runs it; it is a release tool, not part of the binary
// users run.
//
//	go run ./sbom --out dist/mcp-reconnect.spdx.json --version v1.2.3 \
//	  --created 2026-12-01T10:00:00Z --homepage URL --release-url URL --license MIT \
//	  [--notices FILE --go GO] \
//	  linux/amd64=BIN linux/arm64=BIN darwin/amd64=BIN darwin/arm64=BIN
package main

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	var o Options
	var out, created, notices, goCmd string
	flag.StringVar(&out, "out", "", "the SPDX JSON document to write")
	flag.StringVar(&notices, "notices", "", "also write THIRD_PARTY_NOTICES here: the licences of the modules linked")
	flag.StringVar(&goCmd, "go", "go", "the go command the binaries were built with (it finds the modules' files)")
	flag.StringVar(&o.Version, "version", "", "the release version")
	flag.StringVar(&created, "created", "", "RFC 3339 time of the commit: the document's creation time")
	flag.StringVar(&o.Homepage, "homepage", "", "the project's repository URL")
	flag.StringVar(&o.ReleaseURL, "release-url", "", "base of the release assets' URLs (URL/VERSION/ASSET)")
	flag.StringVar(&o.License, "license", "", "SPDX license of the project")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: sbom --out FILE --version V --created T --homepage URL --release-url URL --license SPDX [--notices FILE --go GO] OS/ARCH=BINARY...")
		flag.PrintDefaults()
	}
	flag.Parse()
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		fail(fmt.Errorf("--created %q: %w", created, err))
	}
	o.Created = t
	for _, a := range flag.Args() {
		plat, path, ok := strings.Cut(a, "=")
		goos, goarch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || goos == "" || goarch == "" || path == "" {
			fail(fmt.Errorf("%q: want OS/ARCH=BINARY", a))
		}
		b, err := os.ReadFile(path)
		if err != nil {
			fail(err)
		}
		bi, err := buildinfo.ReadFile(path)
		if err != nil {
			fail(fmt.Errorf("%s: %w", path, err))
		}
		sum := sha256.Sum256(b)
		o.Binaries = append(o.Binaries, Binary{Name: filepath.Base(path), OS: goos, Arch: goarch, SHA256: hex.EncodeToString(sum[:]), Info: bi})
	}
	if out == "" {
		fail(fmt.Errorf("--out is missing"))
	}
	doc, err := Write(o)
	if err == nil {
		err = os.WriteFile(out, doc, 0o644)
	}
	if err != nil {
		fail(err)
	}
	if notices != "" {
		b, err := Notices(context.Background(), goCmd, o.Binaries)
		if err == nil {
			err = os.WriteFile(notices, b, 0o644)
		}
		if err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sbom:", err)
	os.Exit(1)
}
