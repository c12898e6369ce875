#!/usr/bin/env bash
# Builds the release into dist/ (make release passes linux/amd64
# linux/arm64 darwin/amd64 darwin/arm64):
#   mcp-reconnect-OS-ARCH            the binary of each GOOS/GOARCH given, with
#                                    the version, commit and commit date stamped in
#   mcp-reconnect-OS-ARCH.tar.gz     an archive of each: the binary (0755), shell
#                                    completions, manual pages, LICENSE,
#                                    THIRD_PARTY_NOTICES, README.md
#   mcp-reconnect-linux-ARCH.deb     Linux packages of each linux binary:
#   mcp-reconnect-linux-ARCH.rpm     /usr/bin/mcp-reconnect, completions and man pages
#                                    in their system places, the systemd user unit in
#                                    /usr/lib/systemd/user (tools/distpkg)
#   mcp-reconnect-npm.tgz            the npm package mcp-reconnect, whose command runs
#                                    the binary of one of:
#   mcp-reconnect-npm-OS-CPU.tgz     the npm package @mcp-reconnect/OS-CPU of each
#                                    binary, in npm's names (linux-x64; tools/distpkg)
#   mcp-reconnect-image.oci.tar      the container image of the linux binaries, an
#                                    OCI archive (tools/ociimage)
#   mcp-reconnect.spdx.json          the software bill of materials: each binary
#                                    and the Go modules it links (tools/sbom)
#   mcp-reconnect.rb                 when all four are built, the Homebrew formula
#                                    for the tap, installing from the archives
#                                    (tools/brewformula)
#   SHA256SUMS                       of every file above
# The completions and manual pages are written by the binary itself, run
# on this machine (this platform's binary of the release, or one built
# alike when the release has none). Every archive, package and the image
# ship THIRD_PARTY_NOTICES, the licences of the Go modules the binaries
# link, from the module cache (tools/sbom --notices).
#
# Reproducible: the same commit built with the same Go gives the same bytes,
# wherever the checkout is (-trimpath, -buildid=, CGO_ENABLED=0, no VCS
# stamp that could differ between a clone and a worktree, the commit's time
# as the files' mtime and as every time in the archives, packages, image
# and SBOM). test/release checks all of it (make release-check).
#
# VERSION overrides the version; by default it is the tag (git describe), or
# a Go pseudo-version of the commit when no tag is reachable, "-dirty" when
# the tree has uncommitted changes. Where the release is published (the
# Makefile passes its settings; these are the defaults):
#   SOURCE_URL          the repository: formula homepage, image source label, packages' homepage
#   RELEASE_URL         base of the assets' URLs: $RELEASE_URL/$VERSION/ASSET
#   IMAGE_REPO          the image's repository, its name in the archive
#   BREW_TAP            the Homebrew tap the formula is published in (OWNER/NAME)
#   LICENSE_SPDX        the license (image label, formula, packages, SBOM): MIT, the project's (LICENSE)
#   PACKAGE_MAINTAINER  the .deb's Maintainer and the .rpm's Packager
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
SOURCE_URL=${SOURCE_URL:-https://github.com/mcp-reconnect/mcp-reconnect}
RELEASE_URL=${RELEASE_URL:-$SOURCE_URL/releases/download}
IMAGE_REPO=${IMAGE_REPO:-ghcr.io/mcp-reconnect/mcp-reconnect}
BREW_TAP=${BREW_TAP:-mcp-reconnect/tap}
LICENSE_SPDX=${LICENSE_SPDX:-MIT}
PACKAGE_MAINTAINER=${PACKAGE_MAINTAINER:-the mcp-reconnect authors}
[ $# -gt 0 ] || { echo "usage: $0 GOOS/GOARCH..." >&2; exit 2; }

commit=$(git rev-parse HEAD)
epoch=$(git log -1 --format=%ct HEAD)
date=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)
dirty=
[ -z "$(git status --porcelain)" ] || dirty=-dirty
if [ -z "${VERSION:-}" ]; then
  VERSION=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null) ||
    VERSION="v0.0.0-$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)-$(git rev-parse --short=12 HEAD)$dirty"
fi

settime() { touch -d "@$epoch" "$@" 2>/dev/null || touch -t "$(date -u -r "$epoch" +%Y%m%d%H%M.%S)" "$@"; }
sha256() { if command -v sha256sum >/dev/null; then sha256sum "$@"; else shasum -a 256 "$@"; fi; }
# The release tools are a module of their own (tools/go.mod); they are
# given absolute paths.
tool() { CGO_ENABLED=0 GOFLAGS=-mod=readonly "$GO" -C tools run "$@"; }
dist=$PWD/dist

# build GOOS GOARCH OUT: the release binary. GOFLAGS is reset so that a
# machine's own go env (e.g. -buildvcs) cannot change the bytes;
# GOAMD64/GOARM64 pin the baseline CPU.
build() {
  CGO_ENABLED=0 GOOS=$1 GOARCH=$2 GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly \
    "$GO" build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid= -X main.version=$VERSION -X main.commit=$commit -X main.date=$date" \
    -o "$3" ./cmd/mcp-reconnect
}

rm -rf dist
mkdir dist
bins=()
for target in "$@"; do
  os=${target%/*} arch=${target#*/}
  out=dist/mcp-reconnect-$os-$arch
  echo "release: $out $VERSION" >&2
  build "$os" "$arch" "$out"
  bins+=("$target=$dist/mcp-reconnect-$os-$arch")
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The SBOM, and the notices the archives, packages and image ship.
echo "release: dist/mcp-reconnect.spdx.json" >&2
notices=$tmp/THIRD_PARTY_NOTICES
tool ./sbom --out "$dist/mcp-reconnect.spdx.json" --version "$VERSION" --created "$date" \
  --homepage "$SOURCE_URL" --release-url "$RELEASE_URL" --license "$LICENSE_SPDX" \
  --notices "$notices" --go "$(command -v "$GO")" "${bins[@]}"

# The binary that writes the completions and manual pages: this machine's.
docs_bin=$dist/mcp-reconnect-$("$GO" env GOOS)-$("$GO" env GOARCH)
if [ ! -e "$docs_bin" ]; then
  docs_bin=$tmp/mcp-reconnect
  build "$("$GO" env GOOS)" "$("$GO" env GOARCH)" "$docs_bin"
fi
tool ./distpkg --out "$dist" --version "$VERSION" --created "$date" \
  --homepage "$SOURCE_URL" --license "$LICENSE_SPDX" --maintainer "$PACKAGE_MAINTAINER" \
  --license-file "$PWD/LICENSE" --readme "$PWD/README.md" --notices "$notices" --docs-binary "$docs_bin" "${bins[@]}"

# The image: each linux binary on an empty base, one multi-arch index.
platforms=()
for b in "${bins[@]}"; do
  case $b in linux/*) platforms+=("$b") ;; esac
done
if [ ${#platforms[@]} -gt 0 ]; then
  echo "release: dist/mcp-reconnect-image.oci.tar ${platforms[*]%%=*}" >&2
  tool ./ociimage --out "$dist/mcp-reconnect-image.oci.tar" \
    --version "$VERSION" --revision "$commit" --created "$date" \
    --source "$SOURCE_URL" --licenses "$LICENSE_SPDX" --name "$IMAGE_REPO" \
    --license-file "$PWD/LICENSE" --notices "$notices" "${platforms[@]}"
fi

sums() { (cd dist && LC_ALL=C ls | grep -v '^SHA256SUMS$' | LC_ALL=C sort | while read -r f; do sha256 "$f"; done >SHA256SUMS); }
sums
# The formula offers the archive of every OS and CPU.
if [ "$(grep -c ' mcp-reconnect-\(darwin\|linux\)-\(amd64\|arm64\)\.tar\.gz$' dist/SHA256SUMS)" -eq 4 ]; then
  echo "release: dist/mcp-reconnect.rb" >&2
  tool ./brewformula --sums "$dist/SHA256SUMS" --out "$dist/mcp-reconnect.rb" \
    --version "$VERSION" --commit "$commit" --release-url "$RELEASE_URL" --homepage "$SOURCE_URL" \
    --tap "$BREW_TAP" --license "$LICENSE_SPDX"
  sums
fi
settime dist/*
cat dist/SHA256SUMS
