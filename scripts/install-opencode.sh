#!/usr/bin/env bash
# Installs an OpenCode binary from the npm registry into .cache/ inside the
# repository, unless it is there already, and prints its path. With no
# argument it is the pinned 1.x release (1.18.34) the demo uses; an
# argument names another release: the pinned 2.x one (2.1.2), which the
# e2e tests run beside 1.18.34, or an older 1.x one (the e2e tests of old
# releases install theirs this way).
#
# 1.x is the npm package opencode-linux-x64 (`--version` prints 1.18.34),
# 2.x is @opencode/cli-linux-x64 (`--version` prints "opencode v2.1.2");
# both are self-contained binaries, installed with npm into their own
# prefix:
#
#   .cache/opencode/node_modules/opencode-linux-x64/bin/opencode                   (1.18.34)
#   .cache/opencode-VERSION/node_modules/opencode-linux-x64/bin/opencode           (other 1.x)
#   .cache/opencode-VERSION/node_modules/@opencode/cli-linux-x64/bin/opencode      (2.x)
set -euo pipefail

PINNED="1.18.34"
VERSION="${1:-$PINNED}"
case "$VERSION" in
  *[!0-9.]*|"") echo "install-opencode: version $VERSION is not x.y.z" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/.cache/opencode"
[ "$VERSION" = "$PINNED" ] || prefix="$root/.cache/opencode-$VERSION"
case "$VERSION" in
  1.*) package="opencode-linux-x64"; says="$VERSION" ;;
  *) package="@opencode/cli-linux-x64"; says="opencode v$VERSION" ;;
esac
bin="$prefix/node_modules/$package/bin/opencode"

if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "$says" ]; then
  echo "$bin"
  exit 0
fi
command -v npm >/dev/null || { echo "install-opencode: npm is needed to install $package@$VERSION" >&2; exit 1; }
mkdir -p "$prefix"
echo "install-opencode: installing $package@$VERSION into $prefix" >&2
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$package@$VERSION" >&2
[ -x "$bin" ] || { echo "install-opencode: $bin missing after npm install" >&2; exit 1; }
echo "$bin"
