#!/usr/bin/env bash
# raftd's answer to a WAL that fails under load. Writers on etcd's Go
# client (tests/tools/kvclient) put fresh keys and record every
# acknowledged put. raftd's WAL goes through the disk I/O layer's fault
# backend (CETCD_TEST_DISKIO_FAULT, shm/diskio/diskio.h), armed by a
# trigger file: once the test creates it, the WAL's next fdatasync fails
# (and, as the kernel may after a failed writeback, every write since the
# last good sync is dropped), or in the second run its next write fails.
# raftd must say so and exit; the launcher starts a new raftd, which runs
# without the fault (the one that failed removed the trigger), replays
# the WAL, and writes flow again. No acknowledged put may be lost: each
# is read back with its value and mod revision, after the restart of
# raftd and again after a stop and start of the whole member.
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

# wal_round NAME SPEC WHAT: starts the member with the fault SPEC (its
# trigger not yet there), writers, then arms the fault and checks what
# follows. WHAT names the op that fails.
wal_round() {
	local name=$1 spec=$2 what=$3 log=$IT_TMP/cetcd-$1.log acks=$IT_TMP/acks-$1
	local raftd newpid at n
	export CETCD_TEST_DISKIO_FAULT="$spec"
	if [[ -z $ep ]]; then
		it_cetcd_start t1 "$data" "$log"
		ep=127.0.0.1:$IT_CPORT
	else
		it_cetcd_restart "$log"
	fi
	unset CETCD_TEST_DISKIO_FAULT
	it_member_answers "$IT_CPORT" "$log" "$name: the member answers with the fault backend on its WAL" || return 1
	check "$name: raftd says the WAL's disk faults are injected" \
		it_wait_log "$log" '"injecting disk faults into this file.*"file":"wal"' 10
	check "$name: stored's db runs without faults" test "$(it_count "$log" '"file":"db"')" -eq 0

	it_kv_start "$IT_TMP/writer-$name.out" write -endpoint "$ep" -prefix "wf/$name" -acks "$acks" \
		-writers 4 -per-conn 2
	local w=$IT_KV_PID
	check "$name: writers get acknowledgements" it_wait_lines "$acks" 200 30
	raftd=$(it_cetcd_child raftd)
	at=$(it_lines "$acks")
	: >"$trigger"
	check "$name: the WAL's next $what fails (the trigger is taken)" it_until 30000 test ! -e "$trigger"
	check "$name: raftd logs the failed WAL $what" \
		it_wait_log "$log" '"msg":"WAL write failed; the log accepts nothing more until raftd restarts"' 10
	check "$name: and that it stops, to be restarted and replay the WAL" \
		it_wait_log "$log" '"msg":"the WAL failed; raftd stops and must be restarted to replay it"' 10
	check "$name: raftd (pid $raftd) exits" it_wait_gone "$raftd" 30000
	check "$name: the launcher restarts it" \
		it_wait_log "$log" '"msg":"restarting process".*"process":"raftd"' 10
	newpid=$(it_wait_child raftd "$raftd" 30) || newpid=
	check "$name: a new raftd runs" test -n "$newpid"
	check "$name: writes flow again (200 more acknowledgements after $at)" \
		it_wait_lines "$acks" $((at + 200)) 60
	check "$name: the fault fired once: one failed WAL op in the log" \
		test "$(it_count "$log" '"msg":"WAL write failed')" -eq 1
	check "$name: the new raftd still runs" test "$(it_cetcd_child raftd)" = "$newpid"
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

wal_round sync "file=wal,sync=0,trigger=$trigger" sync
wal_round write "file=wal,write=0,errno=EIO,trigger=$trigger,chain=reap" write

# a plain start on the same data dir: everything is still there
it_cetcd_restart "$IT_TMP/cetcd-final.log"
it_member_answers "$IT_CPORT" "$IT_TMP/cetcd-final.log" "the member starts again without the fault backend" &&
	check "all $acked acknowledged puts of both runs are there after the restart" \
		it_acked_at "$ep" wf "$acks_all" "$acked"
check "no disk fault was injected in the last run" \
	test "$(it_count "$IT_TMP/cetcd-final.log" 'injecting disk faults')" -eq 0
it_summary
