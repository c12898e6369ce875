// Command distpkg writes what people install from a release, beside the
// bare binaries and the image: for each OS and CPU an archive,
// mcp-reconnect-OS-ARCH.tar.gz, holding the binary (0755), the shell
// completions, the manual pages, LICENSE, THIRD_PARTY_NOTICES (the
// licences of the Go modules it links) and README.md under one top
// directory (what the Homebrew formula installs from); for each Linux
// CPU a .deb and an .rpm, mcp-reconnect-linux-ARCH.deb and .rpm, with the
// same files in their system places and the systemd user unit for every
// user (internal/service's PackageUnit, in /usr/lib/systemd/user); and the
// npm packages (npm.go): mcp-reconnect-npm.tgz, the package mcp-reconnect,
// and mcp-reconnect-npm-OS-CPU.tgz, @mcp-reconnect/OS-CPU, one per binary
// in npm's names (linux-x64). They are published platform packages first
// (npm wants --tag for a pre-release version; latest is what `npm install
// mcp-reconnect` installs):
//
//	for f in dist/mcp-reconnect-npm-*-*.tgz; do npm publish --access public --tag latest "$f"; done
//	npm publish --tag latest dist/mcp-reconnect-npm.tgz
//
// The completions and manual pages come from the binary itself, run on
// this machine (--docs-binary, one of this machine's platform): with a
// home of "~" and no XDG variables, so the defaults they show read
// ~/.config/…, not the home of whoever built the release, and with
// SOURCE_DATE_EPOCH at the commit's time, the pages' date.
//
// Reproducible like the binaries: every time in an archive or package is
// the commit's (--created), entries are sorted with fixed owners (root)
// and modes, gzip streams carry no name or time, and nothing of the
// machine (host name, user, paths) is written. scripts/release.sh runs it;
// it is a release tool, not part of the binary users run.
//
//	go run ./distpkg --out DIR --version v1.2.3 --created 2026-12-01T10:00:00Z \
//	  --homepage URL --license MIT --maintainer NAME \
//	  --license-file LICENSE --readme README.md --notices THIRD_PARTY_NOTICES --docs-binary BIN \
//	  linux/amd64=BIN linux/arm64=BIN darwin/amd64=BIN darwin/arm64=BIN
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	var o Options
	var created, docsBin, licenseFile, readme, notices string
	flag.StringVar(&o.Out, "out", "", "the directory to write the archives and packages into")
	flag.StringVar(&o.Version, "version", "", "the release version (v1.2.3, or a Go pseudo-version)")
	flag.StringVar(&created, "created", "", "RFC 3339 time of the commit: every time in the archives and packages")
	flag.StringVar(&o.Homepage, "homepage", "", "the project's page (packages' Homepage, URL)")
	flag.StringVar(&o.License, "license", "", "SPDX license of the project (packages' License)")
	flag.StringVar(&o.Maintainer, "maintainer", "", "the packages' Maintainer (deb) and Packager (rpm)")
	flag.StringVar(&licenseFile, "license-file", "", "the LICENSE file shipped")
	flag.StringVar(&readme, "readme", "", "the README.md shipped")
	flag.StringVar(&notices, "notices", "", "the THIRD_PARTY_NOTICES shipped (tools/sbom --notices)")
	flag.StringVar(&docsBin, "docs-binary", "", "a release binary this machine runs, for the completions and manual pages")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: distpkg --out DIR --version V --created T --homepage URL --license SPDX --maintainer NAME --license-file F --readme F --notices F --docs-binary BIN OS/ARCH=BINARY...")
		flag.PrintDefaults()
	}
	flag.Parse()
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		fail(fmt.Errorf("--created %q: %w", created, err))
	}
	o.Created = t
	for _, a := range flag.Args() {
		plat, bin, ok := strings.Cut(a, "=")
		goos, goarch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || goos == "" || goarch == "" || bin == "" {
			fail(fmt.Errorf("%q: want OS/ARCH=BINARY", a))
		}
		o.Binaries = append(o.Binaries, Binary{OS: goos, Arch: goarch, Path: bin})
	}
	for _, f := range []struct {
		flag string
		path string
		into *[]byte
	}{{"--license-file", licenseFile, &o.LicenseText}, {"--readme", readme, &o.Readme}, {"--notices", notices, &o.Notices}} {
		if f.path == "" {
			fail(fmt.Errorf("%s is missing", f.flag))
		}
		if *f.into, err = os.ReadFile(f.path); err != nil {
			fail(err)
		}
	}
	if docsBin == "" {
		fail(fmt.Errorf("--docs-binary is missing: give a release binary of this machine's platform"))
	}
	if o.Docs, err = GenerateDocs(context.Background(), docsBin, o.Created); err != nil {
		fail(err)
	}
	written, err := Build(o)
	if err != nil {
		fail(err)
	}
	for _, w := range written {
		fmt.Fprintln(os.Stderr, "release:", w)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "distpkg:", err)
	os.Exit(1)
}
