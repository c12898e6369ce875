#!/usr/bin/env bash
# Builds the release into dist/: the binaries, one per GOOS/GOARCH given
# (make release passes linux/amd64 linux/arm64 darwin/amd64 darwin/arm64),
# with the version, commit and commit date stamped in; the container image
# of the linux ones, an OCI archive (tools/ociimage); dist/SHA256SUMS of
# all of them; and, when all four binaries are built, the Homebrew formula
# for a tap (dist/mcp-reconnect.rb, tools/brewformula), whose URLs and
# sha256 are those of the release assets.
#
# Reproducible: the same commit built with the same Go gives the same bytes,
# wherever the checkout is (-trimpath, -buildid=, CGO_ENABLED=0, no VCS
# stamp that could differ between a clone and a worktree, the commit's time
# as the files' mtime and as every time in the image). test/release checks
# all of it (make release-check).
#
# VERSION overrides the version; by default it is the tag (git describe), or
# a Go pseudo-version of the commit when no tag is reachable, "-dirty" when
# the tree has uncommitted changes. Where the release is published (the
# Makefile passes its settings; these are the defaults):
#   SOURCE_URL    the repository: formula homepage, image source label
#   RELEASE_URL   base of the assets' URLs: $RELEASE_URL/$VERSION/mcp-reconnect-OS-ARCH
#   IMAGE_REPO    the image's repository, its name in the archive
#   LICENSE_SPDX  the license (image label, formula): MIT, the project's (LICENSE)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
SOURCE_URL=${SOURCE_URL:-https://github.com/mcp-reconnect/mcp-reconnect}
RELEASE_URL=${RELEASE_URL:-$SOURCE_URL/releases/download}
IMAGE_REPO=${IMAGE_REPO:-ghcr.io/mcp-reconnect/mcp-reconnect}
LICENSE_SPDX=${LICENSE_SPDX:-MIT}
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

# The release tools are a module of their own (tools/go.mod); they are
# given absolute paths.
tool() { CGO_ENABLED=0 GOFLAGS=-mod=readonly "$GO" -C tools run "$@"; }
dist=$PWD/dist

settime() { touch -d "@$epoch" "$@" 2>/dev/null || touch -t "$(date -u -r "$epoch" +%Y%m%d%H%M.%S)" "$@"; }

rm -rf dist
mkdir dist
for target in "$@"; do
  os=${target%/*} arch=${target#*/}
  out=dist/mcp-reconnect-$os-$arch
  echo "release: $out $VERSION" >&2
  # GOFLAGS is reset so that a machine's own go env (e.g. -buildvcs) cannot
  # change the bytes; GOAMD64/GOARM64 pin the baseline CPU.
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly \
    "$GO" build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid= -X main.version=$VERSION -X main.commit=$commit -X main.date=$date" \
    -o "$out" ./cmd/mcp-reconnect
done

# The image: each linux binary on an empty base, one multi-arch index.
platforms=()
for target in "$@"; do
  case $target in linux/*) platforms+=("$target=$dist/mcp-reconnect-${target%/*}-${target#*/}") ;; esac
done
if [ ${#platforms[@]} -gt 0 ]; then
  echo "release: dist/mcp-reconnect-image.oci.tar ${platforms[*]%%=*}" >&2
  tool ./ociimage --out "$dist/mcp-reconnect-image.oci.tar" \
    --version "$VERSION" --revision "$commit" --created "$date" \
    --source "$SOURCE_URL" --licenses "$LICENSE_SPDX" --name "$IMAGE_REPO" "${platforms[@]}"
fi
(
  cd dist
  if command -v sha256sum >/dev/null; then sha256sum mcp-reconnect-*; else shasum -a 256 mcp-reconnect-*; fi >SHA256SUMS
)
# The formula needs every binary it offers.
if [ $(grep -c ' mcp-reconnect-\(darwin\|linux\)-\(amd64\|arm64\)$' dist/SHA256SUMS) -eq 4 ]; then
  echo "release: dist/mcp-reconnect.rb" >&2
  tool ./brewformula --sums "$dist/SHA256SUMS" --out "$dist/mcp-reconnect.rb" \
    --version "$VERSION" --commit "$commit" --release-url "$RELEASE_URL" --homepage "$SOURCE_URL" --license "$LICENSE_SPDX"
fi
settime dist/*
cat dist/SHA256SUMS
