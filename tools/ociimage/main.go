// Command ociimage builds the release's container image without a
// container daemon: a multi-arch OCI image (one manifest per linux/ARCH
// binary given) of the static mcp-reconnect binary on an empty base,
// running as a non-root user with the entrypoint `mcp-reconnect watch`,
// with LICENSE and THIRD_PARTY_NOTICES in /usr/share/doc/mcp-reconnect,
// written as an OCI image layout in one tar file (an "OCI archive", which
// `docker load`, `podman load` and `skopeo copy oci-archive:` read).
//
// It is reproducible like the binaries: every timestamp is the commit's
// (--created), tar entries are sorted with fixed owners and modes, gzip
// carries no name or time, so the same binaries and flags give the same
// bytes. scripts/release.sh runs it; it is a release tool, not part of
// the binary users run.
//
//	go run ./tools/ociimage --out dist/mcp-reconnect-image.oci.tar \
//	  --version v1.2.3 --revision COMMIT --created 2026-12-01T10:00:00Z \
//	  --source URL --licenses SPDX --name REPO --license-file LICENSE --notices THIRD_PARTY_NOTICES \
//	  linux/amd64=dist/mcp-reconnect-linux-amd64 linux/arm64=dist/mcp-reconnect-linux-arm64
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	var o Options
	var created, licenseFile, notices string
	flag.StringVar(&o.Out, "out", "", "the OCI archive to write")
	flag.StringVar(&o.Version, "version", "", "the release version (label, tag)")
	flag.StringVar(&o.Revision, "revision", "", "the commit (label)")
	flag.StringVar(&created, "created", "", "RFC 3339 time of the commit: every timestamp in the image")
	flag.StringVar(&o.Source, "source", "", "the source repository URL (label)")
	flag.StringVar(&o.Licenses, "licenses", "NOASSERTION", "SPDX license expression (label)")
	flag.StringVar(&o.Name, "name", "", "the image's repository (e.g. ghcr.io/OWNER/mcp-reconnect), for the archive's image name annotation")
	flag.StringVar(&licenseFile, "license-file", "", "the project's LICENSE, shipped in "+DocDir)
	flag.StringVar(&notices, "notices", "", "THIRD_PARTY_NOTICES (tools/sbom --notices), shipped in "+DocDir)
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: ociimage --out FILE --version V --revision C --created T --source URL [--licenses L] [--name REPO] --license-file F --notices F linux/ARCH=BINARY...")
		flag.PrintDefaults()
	}
	flag.Parse()
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		fail(fmt.Errorf("--created %q: %w", created, err))
	}
	o.Created = t
	for _, f := range []struct {
		path string
		into *[]byte
	}{{licenseFile, &o.LicenseText}, {notices, &o.Notices}} {
		if f.path == "" {
			continue // validate says what is missing
		}
		if *f.into, err = os.ReadFile(f.path); err != nil {
			fail(err)
		}
	}
	for _, a := range flag.Args() {
		plat, bin, ok := strings.Cut(a, "=")
		osName, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || osName != "linux" || arch == "" || bin == "" {
			fail(fmt.Errorf("%q: want linux/ARCH=BINARY", a))
		}
		o.Binaries = append(o.Binaries, Binary{Arch: arch, Path: bin})
	}
	if err := Build(o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ociimage:", err)
	os.Exit(1)
}
