#!/usr/bin/env bash
# Builds the release binaries into dist/: one per GOOS/GOARCH given (make
# release passes linux/amd64 linux/arm64 darwin/amd64 darwin/arm64), with the
# version, commit and commit date stamped in, and dist/SHA256SUMS.
#
# Reproducible: the same commit built with the same Go gives the same bytes,
# wherever the checkout is (-trimpath, -buildid=, CGO_ENABLED=0, no VCS
# stamp that could differ between a clone and a worktree, the commit's time
# as the files' mtime). test/release checks all of it (make release-check).
#
# VERSION overrides the version; by default it is the tag (git describe), or
# a Go pseudo-version of the commit when no tag is reachable, "-dirty" when
# the tree has uncommitted changes.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
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
(
  cd dist
  if command -v sha256sum >/dev/null; then sha256sum mcp-reconnect-*; else shasum -a 256 mcp-reconnect-*; fi >SHA256SUMS
)
settime dist/*
cat dist/SHA256SUMS
