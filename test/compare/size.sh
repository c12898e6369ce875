#!/bin/sh
# Weighs bin/mcp-reconnect as it is and with an OpenAPI library linked
# into internal/opencode/apidesc (issue 21): builds each variant from a
# scratch copy of the tracked tree, so the project's go.mod stays as it
# is. Prints "variant flags bytes".
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for variant in none libopenapi@v0.42.4 kin-openapi@v0.153.0; do
	rm -rf "$tmp/src"
	mkdir "$tmp/src"
	(cd "$root" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$tmp/src"
	name=${variant%@*}
	if [ "$name" != none ]; then
		cp "$root/test/compare/size/$name.go.txt" "$tmp/src/internal/opencode/apidesc/zz_$name.go"
		case $name in
		libopenapi) mod=github.com/pb33f/libopenapi ;;
		kin-openapi) mod=github.com/getkin/kin-openapi ;;
		esac
		(cd "$tmp/src" && go get "$mod@${variant#*@}" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1)
	fi
	for flags in "" "-s -w"; do
		(cd "$tmp/src" && go build -ldflags="$flags" -o "$tmp/bin" ./cmd/mcp-reconnect)
		echo "$name ${flags:-default} $(wc -c <"$tmp/bin")"
	done
done
