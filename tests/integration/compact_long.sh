#!/usr/bin/env bash
# A physical compaction (etcdctl compact --physical) whose deletion takes
# longer than gatewayd's request timeout is answered with its result, not
# "etcdserver: request timed out": stored tells the waiting request about
# every second that its answer is still coming (MSG_RESULT_INTERIM,
# shm/msg.h), and the gateway moves the request's deadline on. When those
# stop because stored is stopped (SIGSTOP) in the middle of one, the
# client does get the timeout, and the compaction finishes once stored
# runs again (SIGCONT). When stored is killed in the middle of one, the
# restarted stored resumes the deletion from the db and takes the waiting
# request over from the region (status_waiting_write, shm/status.h): its
# interim results go on, and the client gets the compaction's success
# once the deletion is done.
#
# The deletion is made slow, and so longer than the request timeout
# (5 s + 2 * --election-timeout: 5.2 s here), by a slow disk: the disk
# I/O layer's test fault backend (CETCD_TEST_DISKIO_FAULT, delay=,
# base/diskio/diskio.h) makes every write of stored's db wait 40 ms while
# a trigger file exists, and --experimental-compaction-batch-limit 10
# makes the deletion of about 2,000 key entries some 200 commits: at
# least 8 s, whatever the machine.
# Exits 77 when etcdctl 3.4 or the programs are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init compact_long

TIMEOUT_MS=5200
slow="$IT_TMP/slow-disk"
ctl() { etcdctl --endpoints "127.0.0.1:$IT_CPORT" --command-timeout 60s "$@"; }
# txns FIRST N: N txns of 128 puts each (keys k0..k127), values tagged
# FIRST.., so every txn is one revision of 128 key entries
txns() {
	local i k
	for i in $(seq "$1" $(($1 + $2 - 1))); do
		{
			echo
			for k in $(seq 0 127); do echo "put k$k v$i"; done
			echo
			echo
		} | ctl txn >/dev/null || return 1
	done
}
rev() { ctl get k0 -w json | python3 -c 'import json, sys; print(json.load(sys.stdin)["header"]["revision"])'; }
# compacted R: a read below R is refused as compacted, one at R served
compacted() {
	local out
	out=$(ctl get k0 --rev=$(($1 - 1)) 2>&1 || true)
	grep -q 'required revision has been compacted' <<<"$out" && ctl get k0 --rev="$1" >/dev/null
}
finished() { it_count "$IT_CETCD_LOG" '"msg":"finished compaction"'; }
# compact_waiting N FIRST: the Nth compaction: 16 txns from FIRST, then a
# physical compaction at the revision (r) on the slow disk, in the
# background (pid cpid, started at t0, output in out_file), checked to
# wait past its first deadline with its deletion under way
compact_waiting() {
	check "16 more txns are applied" txns "$2" 16
	r=$(rev)
	touch "$slow"
	out_file="$IT_TMP/compact$1.out"
	t0=$(it_now_ms)
	ctl compact "$r" --physical >"$out_file" 2>&1 &
	cpid=$!
	it_track "$cpid"
	# etcdctl writes its one line when it returns
	waits_on() { [[ ! -s $out_file ]] && (($(it_now_ms) - t0 > TIMEOUT_MS + 500)); }
	check "compaction $1's request still waits past its first deadline" \
		it_until 20000 waits_on
	check "the deletion is still under way" test "$(finished)" -eq $(($1 - 1))
}
# signal_stored SIG: sends stored (pid: stored) SIG, waits for the
# compaction's client (exit status st, its output out, took ms after the
# signal) and makes the disk fast again
signal_stored() {
	local at
	stored=$(it_cetcd_child stored)
	at=$(it_now_ms)
	kill -"$1" "$stored"
	st=0
	wait "$cpid" || st=$?
	took=$(($(it_now_ms) - at))
	rm -f "$slow"
	out=$(cat "$out_file")
	echo "  compact --physical at $r, SIG$1 to stored after $((at - t0)) ms: exit $st $took ms later: $out"
}

export CETCD_TEST_DISKIO_FAULT="file=db,delay=40,trigger=$slow"
it_cetcd_start s1 "$IT_TMP/data" "$IT_TMP/cetcd.log" --gateways 1 \
	--heartbeat-interval 20 --election-timeout 100 \
	--experimental-compaction-batch-limit 10
unset CETCD_TEST_DISKIO_FAULT
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "stored writes its db through the slow disk" \
	it_wait_log "$IT_CETCD_LOG" '"msg":"injecting disk faults into this file.*"file":"db"' 10

# 1. a deletion longer than the request timeout is answered with success
check "16 txns of 128 puts are applied" txns 1 16
r1=$(rev)
touch "$slow"
t0=$(it_now_ms)
out=$(ctl compact "$r1" --physical 2>&1) && st=0 || st=$?
took=$(($(it_now_ms) - t0))
rm -f "$slow"
echo "  compact --physical at $r1: exit $st after $took ms: $out"
check "the physical compaction took longer than the request timeout ($TIMEOUT_MS ms)" \
	test "$took" -gt "$TIMEOUT_MS"
check "and the client got its success" test "$st" -eq 0
check "the answer names the revision" grep -q "compacted revision $r1" <<<"$out"
check "not a timeout" test -z "$(grep -i 'timed out' <<<"$out")"
check "the deletion had finished when it was answered" test "$(finished)" -ge 1
check "reads below the revision are refused as compacted" compacted "$r1"

# 2. stored stopped in the middle of one, past the request's first
# deadline: no more interim results, and the deadline holds again
compact_waiting 2 17
r2=$r
signal_stored STOP
kill -CONT "$stored"
check "the client got an error" test "$st" -ne 0
check "etcd's request timeout" grep -q 'etcdserver: request timed out' <<<"$out"
check "within a request timeout of the stop (and the last interim result)" \
	test "$took" -le $((TIMEOUT_MS + 2000))
check "stored, running again, finishes the compaction" it_wait_log "$IT_CETCD_LOG" \
	'"msg":"finished compaction".*"compact-revision":'"$r2" 30
check "reads below the second revision are refused as compacted" compacted "$r2"
check "it is the same stored that was stopped" test "$(it_cetcd_child stored)" = "$stored"

# 3. stored killed (SIGKILL) in the middle of one, past the request's
# first deadline, the disk still slow: the restarted stored resumes the
# deletion from the db (scheduledCompactRev) and takes the request over,
# so the client gets the compaction's success once it is done
compact_waiting 3 33
r3=$r
finished_before=$(finished)
signal_stored KILL
check "the client got its success" test "$st" -eq 0
check "the answer names the third revision" grep -q "compacted revision $r3" <<<"$out"
check "a new stored answered it" test "$(it_cetcd_child stored)" != "$stored"
check "which took the request over" it_wait_log "$IT_CETCD_LOG" \
	'"msg":"took over the physical compactions the previous stored had not answered","count":1,"compacting":true' 1
check "and finished the deletion before answering" test "$(finished)" -gt "$finished_before"
check "reads below the third revision are refused as compacted" compacted "$r3"
check "cetcd stops cleanly" it_cetcd_stop
it_summary
