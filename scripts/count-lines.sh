#!/bin/sh
# count-lines.sh [TREE]: the production Go of mcp-reconnect in non-blank,
# non-comment lines (everything but _test.go files, test doubles under a
# fake* directory, testdata, test/ and tools/), per package and in total.
set -eu
cd "${1:-.}"
git ls-files '*.go' | grep -v '_test\.go$' | grep -v -E '^(test|tools)/' | grep -v -E '(^|/)(fake[^/]*|testdata)/' |
while read -r f; do
  awk -v F="$f" '
    inblk { if (index($0,"*/")) inblk=0; next }
    { s=$0; gsub(/^[ \t]+|[ \t]+$/,"",s) }
    s=="" { next }
    s ~ /^\/\// { next }
    s ~ /^\/\*/ { if (!index(substr(s,3),"*/")) inblk=1; next }
    { n++ }
    END { d=F; sub(/\/[^\/]*$/,"",d); printf "%s %d\n", d, n+0 }' "$f"
done | awk '{p[$1]+=$2; t+=$2} END {for (k in p) printf "%6d %s\n", p[k], k; printf "%6d total\n", t}' | sort -n
