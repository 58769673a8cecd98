#!/usr/bin/env bash
# --unsafe-no-fsync, as etcd 3.4's: the WAL and the db are written without
# fsync. The member runs with the disk I/O layer's fault backend
# (CETCD_TEST_DISKIO_FAULT, base/diskio/diskio.h) failing every fdatasync
# of its WAL, then of its db: with the flag, raftd and stored say they
# skip fsync, never sync, and so take puts as usual; without it, the first
# WAL sync fails and no put is acknowledged.
# Exits 77 when the programs or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init unsafe-no-fsync

ctl() { etcdctl --dial-timeout 2s --command-timeout 3s --endpoints "127.0.0.1:$IT_CPORT" "$@"; }
puts() {
	local k
	for k in $(seq 1 20); do ctl put "k$k" "v$k" >/dev/null || return 1; done
	[[ $(ctl get k --prefix --keys-only | grep -c '^k') == 20 ]]
}
warned='"msg":"--unsafe-no-fsync is set: the WAL and the db are written without fsync'

# run NAME FILE: a member with every fdatasync of FILE (wal or db) failing
# and --unsafe-no-fsync; 20 puts, a restart, the puts still there.
run() {
	local name=$1 file=$2 log=$IT_TMP/$1.log
	IT_CPORT=
	export CETCD_TEST_DISKIO_FAULT="file=$file,sync=0,repeat"
	it_cetcd_start "$name" "$IT_TMP/$name" "$log" --unsafe-no-fsync
	it_member_answers "$IT_CPORT" "$log" "$name: the member answers, every $file sync failing" || return 1
	check "$name: faults are injected into the $file" \
		it_wait_log "$log" "\"injecting disk faults into this file.*\"file\":\"$file\"" 10
	check "$name: raftd says it skips fsync" it_wait_log "$log" "\"logger\":\"raftd\".*$warned" 10
	check "$name: stored says it skips fsync" it_wait_log "$log" "\"logger\":\"stored\".*$warned" 10
	check "$name: 20 puts are acknowledged and read back" puts
	check "$name: no disk write or sync failed" test "$(it_count "$log" '"msg":"a disk write or sync failed')" -eq 0
	it_cetcd_stop
	it_cetcd_restart "$log"
	it_member_answers "$IT_CPORT" "$log" "$name: it starts again" || return 1
	check "$name: the 20 keys are there after the restart" \
		test "$(ctl get k --prefix --keys-only | grep -c '^k')" -eq 20
	it_cetcd_stop
	unset CETCD_TEST_DISKIO_FAULT
}
run wal wal
run db db

# the same fault without the flag: the WAL's first sync fails
IT_CPORT=
export CETCD_TEST_DISKIO_FAULT="file=wal,sync=0,repeat"
it_cetcd_start synced "$IT_TMP/synced" "$IT_TMP/synced.log"
unset CETCD_TEST_DISKIO_FAULT
check "without the flag, the failing WAL sync is met" \
	it_wait_log "$IT_TMP/synced.log" '"msg":"a disk write or sync failed' 20
check "and a put is not acknowledged" eval '! ctl put k v >/dev/null 2>&1'
check "and it does not say it skips fsync" test "$(it_count "$IT_TMP/synced.log" "$warned")" -eq 0
it_cetcd_stop || true
it_summary
