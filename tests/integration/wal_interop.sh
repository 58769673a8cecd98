#!/usr/bin/env bash
# cetcd's WAL against etcd 3.4's own wal package (tests/tools/walgen, built
# from Debian's golang-etcd-server-dev):
#  - the same saves give byte-identical WAL directories (segments, cuts,
#    CRC chain, preallocation), also when either side appends to a WAL the
#    other wrote;
#  - each reads what the other wrote to the same entries, hard state and
#    metadata, also from a snapshot point in a later segment;
#  - a torn tail reads the same in both, and after cetcd repaired it on
#    open and appended, etcd reads the result.
set -euo pipefail

: "${CETCD_BUILD:?CETCD_BUILD must name the build directory}"
: "${CETCD_SRC:?CETCD_SRC must name the source directory}"
ours=$CETCD_BUILD/tests/unit/raftd/wal/test_wal_interop
if [[ ! -x $ours ]]; then
	echo "SKIP: $ours is not built"
	exit 77
fi
if ! command -v go >/dev/null; then
	echo "SKIP: go is not installed (Debian package golang-go)"
	exit 77
fi
gopath=/usr/share/gocode
if [[ ! -d $gopath/src/go.etcd.io/etcd/wal ]]; then
	echo "SKIP: etcd's wal package is missing (Debian package golang-etcd-server-dev)"
	exit 77
fi
if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 is needed to damage a segment"
	exit 77
fi

tmp=$(mktemp -d /tmp/cetcd-wal-interop.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

walgen=$CETCD_BUILD/tests/walgen
mkdir -p "$CETCD_BUILD/tests/gocache"
(cd "$CETCD_SRC/tests/tools/walgen" &&
	GO111MODULE=off GOPATH=$gopath GOCACHE=$CETCD_BUILD/tests/gocache GOFLAGS= \
		go build -o "$walgen" .) || {
	echo "FAIL: walgen does not build against $gopath"
	exit 1
}

fail() {
	echo "FAIL: $*"
	exit 1
}

# same_dirs A B: the same *.wal files with the same bytes.
same_dirs() {
	local a=$1 b=$2
	diff <(cd "$a" && ls -- *.wal) <(cd "$b" && ls -- *.wal) >/dev/null ||
		fail "segment names differ: $(ls "$a") vs $(ls "$b")"
	local f
	for f in "$a"/*.wal; do
		cmp -s "$f" "$b/$(basename "$f")" || fail "$(basename "$f") differs between $a and $b"
	done
}

# same_reads DIR [read flags]: etcd and cetcd read DIR the same.
same_reads() {
	local d=$1
	shift
	"$walgen" read "$d" "$@" >"$tmp/read.etcd" || fail "etcd cannot read $d $*"
	"$ours" read "$d" "$@" >"$tmp/read.cetcd" 2>"$tmp/read.err" ||
		fail "cetcd cannot read $d $*: $(cat "$tmp/read.err")"
	cmp -s "$tmp/read.etcd" "$tmp/read.cetcd" ||
		fail "reads of $d differ: $(diff "$tmp/read.etcd" "$tmp/read.cetcd" | head -5 | cut -c1-120)"
}

scenarios=(
	"-n 60 -batch 3"
	"-n 400 -batch 60 -segment 300000 -rewind-every 3 -snap-every 30"
	"-n 500 -batch 200 -segment 100000"
	"-n 2000 -batch 40 -segment 1000000 -snap-every 100 -rewind-every 11"
)
n=0
for args in "${scenarios[@]}"; do
	n=$((n + 1))
	e=$tmp/etcd$n c=$tmp/cetcd$n
	# shellcheck disable=SC2086
	"$walgen" write "$e" $args || fail "walgen write $args"
	# shellcheck disable=SC2086
	"$ours" write "$c" $args 2>"$tmp/err" || fail "cetcd write $args: $(cat "$tmp/err")"
	same_dirs "$e" "$c"
	same_reads "$e"
	same_reads "$c"
	# each appends to the other's WAL
	cp -r "$e" "$e.x"
	cp -r "$c" "$c.x"
	# shellcheck disable=SC2086
	"$ours" write "$e.x" $args 2>"$tmp/err" || fail "cetcd append $args: $(cat "$tmp/err")"
	# shellcheck disable=SC2086
	"$walgen" write "$c.x" $args || fail "walgen append $args"
	same_dirs "$e.x" "$c.x"
	same_reads "$e.x"
	echo "ok: $args ($(ls "$e" | wc -l) segments, $(sed -n 3p "$tmp/read.etcd"))"
done

# From a snapshot point: scenario 4 has snapshot records every 100.
term=$("$walgen" read "$tmp/etcd4" | awk '$1 == 300 && NF == 5 { print $2 }')
[[ -n $term ]] || fail "no entry 300 in scenario 4"
same_reads "$tmp/etcd4" -snap-index 300 -snap-term "$term"
grep -q '^entries 1700$' "$tmp/read.cetcd" || fail "reading after snapshot 300: $(sed -n 3p "$tmp/read.cetcd")"
echo "ok: read after snapshot (300, $term)"

# A torn tail: zero the sectors holding the last 600 bytes of data in
# etcd's last segment (a write that never reached the disk), then both
# read it the same.
t=$tmp/torn
cp -r "$tmp/etcd2" "$t"
last=$(ls "$t"/*.wal | tail -1)
python3 - "$last" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
end = len(b.rstrip(b'\0'))
cut = max((end - 600) // 512 * 512, 512)
b[cut:end] = bytes(end - cut)
open(p, 'wb').write(b)
PY
same_reads "$t"
before=$(sed -n 3p "$tmp/read.cetcd")
# cetcd opens it for writing (cutting the torn tail) and appends; etcd
# then reads every record.
"$ours" write "$t" -n 30 -batch 3 2>"$tmp/err" || fail "cetcd append to a torn WAL: $(cat "$tmp/err")"
same_reads "$t"
echo "ok: torn tail ($before before, $(sed -n 3p "$tmp/read.cetcd") after appending)"
echo "PASS"
