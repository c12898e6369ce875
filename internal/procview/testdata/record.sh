#!/bin/sh
# record.sh DEST PID... copies what procview reads of each PID from /proc
# into DEST (a recorded /proc tree for the tests): stat, status, cmdline,
# the cwd link and every thread's children list. Never environ.
set -eu
dest=$1
shift
mkdir -p "$dest"
cp /proc/stat "$dest/stat"
for pid in "$@"; do
	d="$dest/$pid"
	mkdir -p "$d"
	cp "/proc/$pid/stat" "/proc/$pid/status" "/proc/$pid/cmdline" "$d/"
	if cwd=$(readlink "/proc/$pid/cwd"); then ln -sfn "$cwd" "$d/cwd"; fi
	for t in /proc/"$pid"/task/*; do
		tid=${t##*/}
		mkdir -p "$d/task/$tid"
		cp "$t/children" "$d/task/$tid/children" 2>/dev/null || true
	done
done
