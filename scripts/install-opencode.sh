#!/usr/bin/env bash
# Installs the pinned OpenCode binary (npm package opencode-linux-x64) into
# .cache/opencode inside the repository, unless it is there already.
# Prints the binary's path. Used by `make test`, `make demo` and .ci/run.
set -euo pipefail

VERSION="1.18.34"
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/.cache/opencode"
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
