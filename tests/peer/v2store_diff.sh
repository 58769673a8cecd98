#!/bin/bash
# Differential check of cetcd's v2 store codec (cluster/v2store.c, the
# membership in a raft snapshot's Data) against etcd 3.4's own v2store and
# membership packages (tests/tools/v2storediff, built from Debian's
# golang-etcd-server-dev):
#   1. random membership histories applied by etcd's RaftCluster to its
#      v2 store and saved by store.Save: cetcd decodes each and must find
#      the members, removed ids and version etcd's RaftCluster.Recover
#      finds;
#   2. random memberships encoded by cetcd: etcd's store.Recovery and
#      RaftCluster.Recover must take each and find exactly that
#      membership.
# Seeded (CETCD_TEST_SEED=<n> repeats a run; V2STORE_DIFF_COUNT sets the
# number of cases of each half); a failure prints the seed and the cases.
# Exits 77 when go or etcd's Go sources are missing.
source "$(dirname "$0")/../integration/lib.sh"

prog=${V2STORE_DIFF:?V2STORE_DIFF names the v2store_diff program}
seed=${CETCD_TEST_SEED:-$(( ($(date +%s%N) / 1000) % 4294967296 ))}
count=${V2STORE_DIFF_COUNT:-2000}

it_build_go_tool v2storediff go.etcd.io/etcd/etcdserver/api/v2store
go_tool=$IT_BUILD/tests/v2storediff
work=$(mktemp -d "${TMPDIR:-/tmp}/cetcd-v2storediff-XXXXXX")
trap 'rm -rf "$work"' EXIT

# compare EXPECTED GOT WHAT: prints up to 10 differing cases; returns
# their count.
compare() {
	local bad
	bad=$(paste -d'\n' "$1" "$2" | awk -v what="$3" '
		NR % 2 == 1 { want = $0; next }
		$0 != want { n++; if (n <= 10) printf "%s case %d:\n   want: %s\n   got:  %s\n", what, NR / 2, want, $0 >"/dev/stderr" }
		END { print n + 0 }')
	return "$bad"
}

echo "v2store_diff: seed $seed, $count stores saved by etcd, $count by cetcd"
"$go_tool" gen "$seed" "$count" >"$work/go"
cut -d' ' -f2- "$work/go" >"$work/go.want"
"$prog" decode <"$work/go" >"$work/go.c"
bad1=0
compare "$work/go.want" "$work/go.c" etcd-saved || bad1=$?

"$prog" gen "$seed" "$count" >"$work/c"
cut -d' ' -f2- "$work/c" >"$work/c.want"
"$go_tool" recover <"$work/c" >"$work/c.go"
bad2=0
compare "$work/c.want" "$work/c.go" cetcd-saved || bad2=$?

members=$(cut -d' ' -f3 "$work/go.want" | tr ';' '\n' | grep -c , || true)
if [ $((bad1 + bad2)) -ne 0 ]; then
	echo "FAIL: $bad1 etcd-saved and $bad2 cetcd-saved stores differ (seed $seed; CETCD_TEST_SEED=$seed repeats it)"
	exit 1
fi
echo "ok: $count stores saved by etcd ($members members in all) decoded to etcd's membership;" \
	"$count stores saved by cetcd recovered by etcd to the same membership"
