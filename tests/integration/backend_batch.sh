#!/usr/bin/env bash
# --backend-batch-interval, --backend-batch-limit and
# --experimental-compaction-batch-limit, mapped onto stored's checkpoints
# and compaction steps (stored/main.c):
#   - with an interval of 1h and a limit of 10^9, 50 puts are read back at
#     once (readers see every applied batch), but none reached the db file
#     durably: after SIGKILL of the member the file, read offline by
#     `etcdctl snapshot status`, is at the revision of its open; the start
#     that follows replays them from the WAL;
#   - with a limit of 10 (interval still 1h) the file is at least at the
#     40th put after the same;
#   - a compaction of 1000 key bucket entries takes at least 100 batches
#     with a compaction batch limit of 10, and one or two with etcd's
#     default of 1000 (stored's "finished compaction" line counts them).
# Exits 77 when the programs or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init backend-batch

ctl() { etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "127.0.0.1:$IT_CPORT" "$@"; }
puts() {
	local k
	for k in $(seq 1 50); do ctl put "k$k" "v$k" >/dev/null || return 1; done
}
keys() { ctl get k --prefix --keys-only | grep -c '^k' || true; }
# the revision the db file holds durably, read offline
disk_rev() {
	etcdctl snapshot status "$1/member/snap/db" -w json 2>/dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["revision"])'
}
# txn_puts VALUE: one txn putting t1..t500 to VALUE (500 key bucket entries)
txn_puts() {
	{
		echo
		for k in $(seq 1 500); do echo "put t$k $1"; done
		echo
		echo
	} | ctl txn >/dev/null
}

# start NAME [flags...]: a fresh member; fails the test when it does not answer
start() {
	local name=$1
	shift
	IT_CPORT=
	it_cetcd_start "$name" "$IT_TMP/$name" "$IT_TMP/$name.log" --max-txn-ops 1000 "$@"
	it_member_answers "$IT_CPORT" "$IT_TMP/$name.log" "$name: the member answers" || exit 1
}

start long --backend-batch-interval=1h --backend-batch-limit=1000000000
r0=$(ctl get x -w json | python3 -c 'import json, sys; print(json.load(sys.stdin)["header"]["revision"])')
check "long: 50 puts are acknowledged" puts
check "long: and read back at once" test "$(keys)" -eq 50
check "long: SIGKILL of the launcher takes every process with it" it_cetcd_kill
rev=$(disk_rev "$IT_TMP/long")
check "long: the db file holds none of them durably (revision $rev, $r0 at the start)" test "$rev" -le "$r0"
it_cetcd_restart "$IT_TMP/long.log"
it_member_answers "$IT_CPORT" "$IT_TMP/long.log" "long: the member starts again" || exit 1
check "long: the 50 puts are there (replayed from the WAL)" test "$(keys)" -eq 50
it_cetcd_stop

start limit --backend-batch-interval=1h --backend-batch-limit=10
check "limit: 50 puts are acknowledged" puts
check "limit: SIGKILL of the launcher takes every process with it" it_cetcd_kill
rev=$(disk_rev "$IT_TMP/limit")
check "limit: the db file holds at least 40 of them durably (revision $rev)" test "$rev" -ge 41

# compact_batches NAME [flags...]: a member, two txns of 500 puts, a
# compaction at the second; sets BATCHES to the batches stored's line
# counts (0: no such line)
compact_batches() {
	local name=$1 rev
	shift
	BATCHES=0
	start "$name" "$@"
	check "$name: two txns of 500 puts" eval 'txn_puts a && txn_puts b'
	rev=$(ctl get t1 -w json | python3 -c 'import json, sys; print(json.load(sys.stdin)["header"]["revision"])')
	check "$name: compaction at $rev" eval 'ctl compact "$rev" >/dev/null'
	if it_wait_log "$IT_TMP/$name.log" '"msg":"finished compaction"' 30; then
		BATCHES=$(sed -n 's/.*"msg":"finished compaction".*"batches":\([0-9]*\).*/\1/p' \
			"$IT_TMP/$name.log" | tail -1)
	fi
	it_cetcd_stop
}
compact_batches c10 --experimental-compaction-batch-limit=10
check "compaction limit 10: the compaction took at least 100 batches (${BATCHES:-0})" \
	test "${BATCHES:-0}" -ge 100
compact_batches cdef
check "default compaction limit (1000): it took one or two (${BATCHES:-0})" \
	test "${BATCHES:-0}" -ge 1 -a "${BATCHES:-0}" -le 2
it_summary
