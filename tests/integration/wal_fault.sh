#!/usr/bin/env bash
# raftd's and stored's answer to a disk that fails under load. Writers
# on etcd's Go client (tests/tools/kvclient) put fresh keys and record
# every acknowledged put. raftd's WAL, or stored's db, goes through the
# disk I/O layer's fault backend (CETCD_TEST_DISKIO_FAULT,
# base/diskio/diskio.h), armed by a trigger file: once the test creates
# it, the WAL's next fdatasync fails (and, as the kernel may after a
# failed writeback, every write since the last good sync is dropped), in
# the second run the WAL's next write, in the third the fdatasync of
# stored's next checkpoint. The process must say so and exit; the
# launcher starts a new one, which runs without the fault (the one that
# failed removed the trigger) and recovers from its last durable state
# (raftd replays the WAL, stored its checkpoint and what raftd hands it
# again), and writes flow again. No acknowledged put may be lost: each is
# read back with its value and mod revision, after each run and again
# after a stop and start of the whole member.
# Exits 77 when the programs, etcdctl, python3, curl or Go with Debian's
# clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_kvclient
it_init wal-fault

data=$IT_TMP/data
trigger=$IT_TMP/wal-fault.trigger
ep=
acks_all=
acked=0

# fault_round NAME SPEC PROC WHAT FAILED STOPS: starts the member with the
# fault SPEC (its trigger not yet there) and writers, then arms the fault
# and checks what follows: process PROC logs FAILED (a regex, once) and
# STOPS, exits, and is started again; WHAT names the op that fails.
fault_round() {
	local name=$1 spec=$2 proc=$3 what=$4 failed=$5 stops=$6
	local log=$IT_TMP/cetcd-$1.log acks=$IT_TMP/acks-$1 file other pid newpid at n
	file=${spec#file=}
	file=${file%%,*}
	other=$([[ $file == wal ]] && echo db || echo wal)
	export CETCD_TEST_DISKIO_FAULT="$spec"
	if [[ -z $ep ]]; then
		it_cetcd_start t1 "$data" "$log"
		ep=127.0.0.1:$IT_CPORT
	else
		it_cetcd_restart "$log"
	fi
	unset CETCD_TEST_DISKIO_FAULT
	it_member_answers "$IT_CPORT" "$log" "$name: the member answers with the fault backend on its $file" || return 1
	check "$name: $proc says the $file's disk faults are injected" \
		it_wait_log "$log" "\"logger\":\"$proc\".*\"injecting disk faults into this file.*\"file\":\"$file\"" 10
	check "$name: the $other runs without faults" test "$(it_count "$log" "\"file\":\"$other\"")" -eq 0

	it_kv_start "$IT_TMP/writer-$name.out" write -endpoint "$ep" -prefix "wf/$name" -acks "$acks" \
		-writers 4 -per-conn 2
	local w=$IT_KV_PID
	check "$name: writers get acknowledgements" it_wait_lines "$acks" 200 30
	pid=$(it_cetcd_child "$proc")
	at=$(it_lines "$acks")
	: >"$trigger"
	check "$name: the $file's next $what fails (the trigger is taken)" it_until 30000 test ! -e "$trigger"
	check "$name: $proc logs the failed $what" it_wait_log "$log" "$failed" 10
	check "$name: and that it stops, to recover from its last durable state" it_wait_log "$log" "$stops" 10
	check "$name: $proc (pid $pid) exits" it_wait_gone "$pid" 30000
	check "$name: the launcher restarts it" \
		it_wait_log "$log" "\"msg\":\"restarting process\".*\"process\":\"$proc\"" 10
	newpid=$(it_wait_child "$proc" "$pid" 30) || newpid=
	check "$name: a new $proc runs" test -n "$newpid"
	check "$name: writes flow again (200 more acknowledgements after $at)" \
		it_wait_lines "$acks" $((at + 200)) 60
	check "$name: the fault fired once: one failed $what in the log" test "$(it_count "$log" "$failed")" -eq 1
	check "$name: the new $proc still runs" test "$(it_cetcd_child "$proc")" = "$newpid"
	check "$name: the writers saw no violation (revisions grow per writer, clean errors only)" \
		it_kv_stop "$w" "$IT_TMP/writer-$name.out"
	n=$(it_lines "$acks")
	echo "  $name: $n acknowledged puts, $at before the fault"
	acks_all+=${acks_all:+,}$acks
	acked=$((acked + n))
	check "$name: all $acked acknowledged puts so far are there (value, mod revision)" \
		it_acked_at "$ep" wf "$acks_all" "$acked"
	local st=0
	it_cetcd_stop || st=$?
	check "$name: SIGTERM stops the member (exit 0)" test "$st" -eq 0
}

wal_failed='"msg":"WAL write failed; the log accepts nothing more until raftd restarts"'
wal_stops='"msg":"the WAL failed; raftd stops and must be restarted to replay it"'
fault_round sync "file=wal,sync=0,trigger=$trigger" raftd sync "$wal_failed" "$wal_stops"
fault_round write "file=wal,write=0,errno=EIO,trigger=$trigger,chain=reap" raftd write \
	"$wal_failed" "$wal_stops"
# stored's checkpoint: its fdatasync fails, the db is failed for good,
# the root readers use is withdrawn, and the next stored replays
fault_round db "file=db,sync=0,trigger=$trigger" stored "checkpoint sync" \
	'"logger":"stored".*"msg":"a disk write or sync failed; the file accepts no more writes' \
	'"msg":"checkpoint failed; restart stored to recover from the last one"'
check "db: stored withdrew the root whose pages the failed sync may have lost" \
	it_log_has "$IT_TMP/cetcd-db.log" '"msg":"withdrew the published root' 1

# a plain start on the same data dir: everything is still there
it_cetcd_restart "$IT_TMP/cetcd-final.log"
it_member_answers "$IT_CPORT" "$IT_TMP/cetcd-final.log" "the member starts again without the fault backend" &&
	check "all $acked acknowledged puts of the three runs are there after the restart" \
		it_acked_at "$ep" wf "$acks_all" "$acked"
check "no disk fault was injected in the last run" \
	test "$(it_count "$IT_TMP/cetcd-final.log" 'injecting disk faults')" -eq 0
it_summary
