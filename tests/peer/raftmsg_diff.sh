#!/bin/bash
# Differential check of raftd's raftpb codec (raftd/raft/raftmsg.c) against
# etcd 3.4's own gogo-generated Marshal and Unmarshal (tests/tools/
# raftmsgdiff, built from Debian's golang-etcd-server-dev):
#   1. random messages encoded by etcd: raftd decodes each and encodes
#      it again, which must give etcd's bytes back;
#   2. random messages encoded by raftd, some cut short, mutated or
#      extended with unknown fields, repeated and merged fields: etcd and
#      raftd must both refuse them, or both take them and encode what
#      they decoded to the same bytes (so raftd's encoding of an intact
#      message is etcd's).
# Seeded (CETCD_TEST_SEED=<n> repeats a run; RAFTMSG_DIFF_COUNT sets the
# number of cases of each half); a failure prints the seed and the cases.
# Exits 77 when go or etcd's Go sources are missing.
source "$(dirname "$0")/../integration/lib.sh"

prog=${RAFTMSG_DIFF:?RAFTMSG_DIFF names the raftmsg_diff program}
seed=${CETCD_TEST_SEED:-$(( ($(date +%s%N) / 1000) % 4294967296 ))}
count=${RAFTMSG_DIFF_COUNT:-20000}

it_build_go_tool raftmsgdiff go.etcd.io/etcd/raft/raftpb
go_tool=$IT_BUILD/tests/raftmsgdiff
work=$(mktemp -d "${TMPDIR:-/tmp}/cetcd-raftmsgdiff-XXXXXX")
trap 'rm -rf "$work"' EXIT

# compare CASES ETCD CETCD WHAT: prints up to 20 differing cases (cases on
# which etcd's decoder panics are not compared); returns their count.
compare() {
	local bad=0 n
	while IFS=: read -r n _; do
		if [[ $(sed -n "${n}p" "$2") == PANIC ]]; then
			continue
		fi
		bad=$((bad + 1))
		if [ $bad -le 20 ]; then
			echo "$4 case $n: $(sed -n "${n}p" "$1")"
			echo "   etcd:  $(sed -n "${n}p" "$2")"
			echo "   cetcd: $(sed -n "${n}p" "$3")"
		fi
	done < <(diff --unchanged-line-format= --old-line-format='%dn:x
' --new-line-format= "$2" "$3" || true)
	return $bad
}

echo "raftmsg_diff: seed $seed, $count cases encoded by etcd, $count by cetcd"
"$go_tool" gen "$seed" "$count" >"$work/go_cases"
"$prog" decode <"$work/go_cases" >"$work/go_cases.c"
"$go_tool" decode <"$work/go_cases" >"$work/go_cases.go"
# etcd's own bytes decode and re-encode to themselves in Go: check it, so
# that agreeing with Go's verdict means giving etcd's bytes back.
if ! diff -q <(sed 's/^[A-Za-z]* /OK /' "$work/go_cases") "$work/go_cases.go" >/dev/null; then
	echo "FAIL: etcd does not re-encode its own messages to the same bytes"
	exit 1
fi
bad1=0
compare "$work/go_cases" "$work/go_cases.go" "$work/go_cases.c" etcd-encoded || bad1=$?

"$prog" gen "$seed" "$count" >"$work/c_cases"
"$prog" decode <"$work/c_cases" >"$work/c_cases.c"
"$go_tool" decode <"$work/c_cases" >"$work/c_cases.go"
bad2=0
compare "$work/c_cases" "$work/c_cases.go" "$work/c_cases.c" cetcd-encoded || bad2=$?

panics=$(grep -c '^PANIC' "$work/c_cases.go" || true)
refused=$(grep -c '^ERR' "$work/c_cases.go" || true)
same=$(paste -d' ' "$work/c_cases" "$work/c_cases.go" | awk '$4 == $2' | wc -l)
if [ $((bad1 + bad2)) -ne 0 ]; then
	echo "FAIL: $bad1 etcd-encoded and $bad2 cetcd-encoded cases differ (seed $seed; CETCD_TEST_SEED=$seed repeats it)"
	exit 1
fi
echo "ok: $count etcd-encoded cases decoded and re-encoded to etcd's bytes;" \
	"$count cetcd-encoded cases: $same taken by etcd and re-encoded to the same bytes," \
	"$refused refused by both, the rest taken by both alike ($panics etcd panics not compared)"
