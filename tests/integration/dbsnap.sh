#!/usr/bin/env bash
# Consistent copies of the db read beside a running stored
# (stored/btree/dbsnap.h): a member takes puts from etcd's Go client
# (kvclient, several connections) while dbsnapcopy streams copies of its
# db slowly, as raftd and gatewayd do. Every copy must
#  - pass stored's engine check and hold, in its meta bucket, the
#    consistent index the stream reported, with key revisions from 2 on
#    without a hole (dbsnapcopy);
#  - pass the real bbolt's consistency check and list, in bbolt's walk of
#    the key bucket, the same revisions (tests/tools/boltcheck);
#  - be accepted by `etcdctl snapshot status` with that revision.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

it_need_cetcd
it_need_etcdctl
[[ -x $IT_BUILD/tests/dbsnapcopy ]] || it_skip "$IT_BUILD/tests/dbsnapcopy is not built"
it_init dbsnap
it_build_go_tool boltcheck go.etcd.io/bbolt
it_build_kvclient
BOLTCHECK=$IT_BUILD/tests/boltcheck

data=$IT_TMP/n1
it_cetcd_start n1 "$data" "$IT_TMP/n1.log"
check "the member is healthy" it_wait_healthy "$IT_CPORT" 30
# The launcher made the region without a name; the copier opens it again
# through the launcher's descriptor.
region=
for fd in /proc/"$IT_CETCD_PID"/fd/*; do
	[[ $(readlink "$fd") == "$IT_RT/n1/"* ]] && region=$fd
done
check "the launcher holds the member region" test -n "$region"

it_kv_start "$IT_TMP/kv.out" write -endpoint "127.0.0.1:$IT_CPORT" -prefix /snap \
	-acks "$IT_TMP/acks" -writers 2 -value-size 300 -duration 120s
check "the writers have puts acknowledged" it_wait_lines "$IT_TMP/acks" 200 30

# Eight copies, 128 KiB per read and 2 ms between reads: each copy takes
# many of stored's commits and checkpoints to read. (While a copy is read
# stored reuses no page freed after it began, as bbolt under a long read
# txn: slower copies grow the file faster.)
ncopies=8
echo "streaming $ncopies copies under load"
copy_st=0
"$IT_BUILD/tests/dbsnapcopy" "$region" "$data/member/snap/db" "$IT_TMP/copy" \
	"$ncopies" 131072 2000 >"$IT_TMP/copies.out" 2>"$IT_TMP/copies.err" || copy_st=$?
sed 's/^/    /' "$IT_TMP/copies.err"
acks_during=$(it_lines "$IT_TMP/acks")
check "the writers went on while the copies were read" \
	it_wait_lines "$IT_TMP/acks" $((acks_during + 50)) 30
check "kvclient's checks held" it_kv_stop "$IT_KV_PID" "$IT_TMP/kv.out"
check "dbsnapcopy streamed $ncopies copies and the engine accepts each (exit $copy_st)" \
	test "$copy_st" = 0 -a "$(grep -c '^copy ' "$IT_TMP/copies.out")" = "$ncopies"

# bbolt_revs FILE: bbolt's check, then the main revisions of the key
# bucket as bbolt walks it, checked to run from 2 without a hole; prints
# the newest.
bbolt_revs() {
	"$BOLTCHECK" -keys key "$1" | python3 -c '
import sys
mains = [int(l.split()[0][:16], 16) for l in sys.stdin if l.startswith("  ")]
want = 2
for m in mains:
    if m == want:
        want += 1
    elif m != want - 1:
        sys.exit("revision %d follows %d" % (m, want - 1))
print(want - 1)'
}

prev_index=0
while read -r _ n _ index _ rev _ size; do
	f=$IT_TMP/copy.$n
	check "copy $n (index $index, revision $rev, $size bytes): bbolt's check and key walk agree" \
		test "$(bbolt_revs "$f")" = "$rev"
	st=$(etcdctl snapshot status "$f" -w json 2>"$IT_TMP/status.err") || st=
	check "copy $n: etcdctl snapshot status accepts it at revision $rev" \
		python3 -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])["revision"] == int(sys.argv[2]) else 1)' \
		"${st:-{\}}" "$rev"
	check "copy $n: its index does not go back ($prev_index -> $index)" test "$index" -ge "$prev_index"
	prev_index=$index
done <"$IT_TMP/copies.out"
first=$(awk 'NR == 1 { print $6 }' "$IT_TMP/copies.out")
last=$(awk 'END { print $6 }' "$IT_TMP/copies.out")
check "the copies saw the store move ($first -> $last)" test "${last:-0}" -gt "${first:-0}"
check "the member logged no error" test "$(it_count "$IT_TMP/n1.log" '"level":"error"')" = 0
it_summary
