#!/bin/bash
# Differential check of raftd's msgappv2 stream codec (raftd/peer/msgappv2.c)
# against etcd 3.4's msgAppV2Encoder and msgAppV2Decoder. Those are
# unexported, so tests/tools/msgappv2diff/msgappv2diff_test.go is built
# into a test binary of etcd's rafthttp package (Debian's sources, with
# go test -overlay adding our one file beside them; nothing is copied):
# it writes random streams with etcd's encoder and reads them back with
# etcd's decoder, and tests/peer/msgappv2_diff.c checks that raftd writes
# the same bytes and reads the same messages, fed in random pieces.
# Seeded (CETCD_TEST_SEED=<n> repeats a run; MSGAPPV2_DIFF_COUNT sets the
# number of streams). Exits 77 when go or etcd's Go sources are missing.
source "$(dirname "$0")/../integration/lib.sh"

prog=${MSGAPPV2_DIFF:?MSGAPPV2_DIFF names the msgappv2_diff program}
seed=${CETCD_TEST_SEED:-$(( ($(date +%s%N) / 1000) % 4294967296 ))}
count=${MSGAPPV2_DIFF_COUNT:-5000}
gopath=/usr/share/gocode
pkg=go.etcd.io/etcd/etcdserver/api/rafthttp

command -v go >/dev/null || it_skip "go is not installed (Debian package golang-go)"
[[ -d $gopath/src/$pkg ]] || it_skip "$pkg is missing (Debian package golang-etcd-server-dev)"
work=$(mktemp -d "${TMPDIR:-/tmp}/cetcd-msgappv2diff-XXXXXX")
trap 'rm -rf "$work"' EXIT
printf '{"Replace":{"%s":"%s"}}\n' \
	"$gopath/src/$pkg/zz_cetcd_msgappv2diff_test.go" \
	"$IT_SRC/tests/tools/msgappv2diff/msgappv2diff_test.go" >"$work/overlay.json"
mkdir -p "$IT_BUILD/tests/gocache"
# The binary is kept in the build tree (linking it takes half a minute)
# and rebuilt when the Go file changes; vet does not read overlays, so it
# is off for this build.
bin=$IT_BUILD/tests/rafthttp_msgappv2diff.test
src=$IT_SRC/tests/tools/msgappv2diff/msgappv2diff_test.go
if [[ ! -x $bin || $src -nt $bin ]] &&
	! (cd "$work" && GO111MODULE=off GOPATH=$gopath GOCACHE=$IT_BUILD/tests/gocache GOFLAGS='' \
		go test -vet=off -overlay "$work/overlay.json" -c -o "$bin" "$pkg"); then
	echo "FAIL: etcd's rafthttp package with msgappv2diff_test.go does not build"
	exit 1
fi

echo "msgappv2_diff: seed $seed, $count streams"
CETCD_MSGAPPV2_SEED=$seed CETCD_MSGAPPV2_COUNT=$count \
	"$bin" -test.run '^TestCetcdMsgAppV2$' >"$work/streams"
if ! "$prog" "$seed" <"$work/streams"; then
	echo "(seed $seed; CETCD_TEST_SEED=$seed repeats it)"
	exit 1
fi
