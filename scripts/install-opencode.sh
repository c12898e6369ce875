#!/usr/bin/env bash
# Installs an OpenCode binary (npm package opencode-linux-x64) into
# .cache/ inside the repository, unless it is there already, and prints
# its path. With no argument it is the pinned version the tests, the demo
# and .ci/run use; an argument names another release (the e2e tests of
# older releases install theirs this way).
set -euo pipefail

PINNED="1.18.34"
VERSION="${1:-$PINNED}"
case "$VERSION" in
  *[!0-9.]*|"") echo "install-opencode: version $VERSION is not x.y.z" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/.cache/opencode"
[ "$VERSION" = "$PINNED" ] || prefix="$root/.cache/opencode-$VERSION"
bin="$prefix/node_modules/opencode-linux-x64/bin/opencode"

if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "$VERSION" ]; then
  echo "$bin"
  exit 0
fi
command -v npm >/dev/null || { echo "install-opencode: npm is needed to install opencode-linux-x64@$VERSION" >&2; exit 1; }
mkdir -p "$prefix"
echo "install-opencode: installing opencode-linux-x64@$VERSION into $prefix" >&2
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "opencode-linux-x64@$VERSION" >&2
[ -x "$bin" ] || { echo "install-opencode: $bin missing after npm install" >&2; exit 1; }
echo "$bin"
