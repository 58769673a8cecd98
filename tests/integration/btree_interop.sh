#!/usr/bin/env bash
# The db file against the real bbolt (Debian's golang-github-coreos-bbolt-dev),
# both ways:
#  - files written by stored's engine pass bbolt's consistency check, and
#    bbolt lists the same buckets, keys and values as the engine does;
#  - files written by bbolt (with and without a freelist page, 4 KiB and
#    1 KiB pages) read the same in the engine and pass its check;
#  - each side then changes the other's file, and both still agree;
#  - the fuzz seed corpus is valid for bbolt.
# tests/tools/boltcheck/ is the bbolt side (Go); its dbtool/ is the engine's
# side, compiled here against the built libcetcd_stored.a (with the read
# side it links, libcetcd_storeread.a, and libcetcd_base.a).
# Exits 77 when go or the bbolt sources are missing.
set -euo pipefail
# check and it_summary (counted assertions)
source "$(dirname "$0")/lib.sh"

src=${CETCD_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${CETCD_BUILD:-$src/build}

it_need_program go "Debian package golang-go"
if [ ! -d /usr/share/gocode/src/go.etcd.io/bbolt ]; then
	echo "skip: bbolt's sources are not installed (golang-github-coreos-bbolt-dev)"
	exit 77
fi
if [ ! -f "$build/lib/libcetcd_stored.a" ]; then
	echo "skip: $build/lib/libcetcd_stored.a is not built"
	exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cetcd-interop-XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "building boltcheck (bbolt) and dbtool (stored's engine)"
(cd "$src/tests/tools/boltcheck" &&
	GOCACHE="$work/gocache" GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= \
		go build -o "$work/boltcheck" .)
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
flags=()
if grep -q '^CETCD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
	flags+=(-fsanitize=address,undefined)
fi
# shellcheck disable=SC2046
"${cc:-cc}" -O1 -g -D_GNU_SOURCE "${flags[@]}" -I"$src" \
	"$src/tests/tools/boltcheck/dbtool/dbtool.c" \
	"$build/lib/libcetcd_stored.a" "$build/lib/libcetcd_storeread.a" \
	"$build/lib/libcetcd_shm.a" "$build/lib/libcetcd_base.a" \
	$(pkg-config --libs liburing) -lpthread -o "$work/dbtool"

bc=$work/boltcheck
dt=$work/dbtool

# same_dump FILE: both sides list the same buckets, keys and values.
same_dump() {
	"$bc" -dump "$1" >"$work/go.dump"
	"$dt" dump "$1" >"$work/c.dump"
	if ! cmp -s "$work/go.dump" "$work/c.dump"; then
		echo "FAIL: $1: bbolt and the engine disagree:"
		diff "$work/go.dump" "$work/c.dump" | head -20
		return 1
	fi
	[ -s "$work/go.dump" ]
}

quiet() {
	"$@" >/dev/null
}

ours_to_bbolt() {
	local f=$work/ours-$1-$2.db
	"$dt" write "$f" "$1" "$2" && "$bc" "$f" >/dev/null && same_dump "$f" &&
		"$bc" -modify -seed "$1" "$f" && "$dt" check "$f" >/dev/null && same_dump "$f"
}

bbolt_to_ours() {
	local f=$work/bbolt-$1-$2-$3.db
	local opt=()
	[ "$3" = nofreelist ] && opt=(-nofreelistsync)
	"$bc" -write -seed "$1" -pagesize "$2" "${opt[@]}" "$f" && "$dt" check "$f" >/dev/null &&
		same_dump "$f" && "$dt" modify "$f" "$1" && "$bc" "$f" >/dev/null && same_dump "$f"
}

for seed in 1 2; do
	check "engine file (seed $seed, OS page size) passes bbolt's check, bbolt changes it" \
		ours_to_bbolt $seed 0
	check "engine file (seed $seed, 1 KiB pages) passes bbolt's check, bbolt changes it" \
		ours_to_bbolt $seed 1024
done
for mode in freelist nofreelist; do
	for ps in 0 1024; do
		check "bbolt file ($mode, page size ${ps:-os}) reads the same, the engine changes it" \
			bbolt_to_ours 3 $ps $mode
	done
done
for f in "$src"/tests/fuzz/corpus/dbfile/*; do
	check "corpus $(basename "$f") is valid for bbolt" quiet "$bc" "$f"
done

it_summary
