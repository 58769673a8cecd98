#!/usr/bin/env bash
# A keepalive of a lease that has expired but whose revoke is not applied
# yet is answered once the revoke is applied (TTL 0; etcdctl's
# keep-alive --once then says "requested lease not found"), as etcd 3.4's
# Renew waits for it: a client told its lease is gone no longer finds the
# lease's keys. The window is made long by a
# slow WAL: the disk I/O layer's test fault backend (CETCD_TEST_DISKIO_FAULT,
# delay=, base/diskio/diskio.h) makes each WAL write wait 1.5 s while a
# trigger file exists, so the revoke the leader proposes at expiry takes
# that long to commit. LeaseTimeToLive saying 0 s left while the key is
# still there shows the test is inside that window.
# Exits 77 when etcdctl 3.4 or the programs are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init lease_expired

slow="$IT_TMP/slow-wal"
ctl() { etcdctl --endpoints "127.0.0.1:$IT_CPORT" --command-timeout 20s "$@"; }
export CETCD_TEST_DISKIO_FAULT="file=wal,delay=1500,trigger=$slow"
it_cetcd_start s1 "$IT_TMP/data" "$IT_TMP/cetcd.log" --gateways 1
unset CETCD_TEST_DISKIO_FAULT
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "raftd writes its WAL through the slow disk" \
	it_wait_log "$IT_CETCD_LOG" '"msg":"injecting disk faults into this file.*"file":"wal"' 10

t0=$(date +%s%3N)
id=$(ctl lease grant 2 | awk '/granted/ { print $2 }')
check "a lease of 2 s is granted ($id)" [ -n "$id" ]
check "a key is put with it" ctl put k v --lease "$id"
: >"$slow"
# expired_pending: 2.3 s since the grant (its 2 s are over; the revoke,
# proposed within half a second of that, waits 1.5 s on the WAL), no
# time left, and its key still there
expired_pending() {
	(($(date +%s%3N) - t0 >= 2300)) &&
		ctl lease timetolive "$id" | grep -q 'remaining(0s)' &&
		[ "$(ctl get k --consistency=s --print-value-only)" = v ]
}
check "the lease expires while its revoke waits on the slow WAL" it_until 6000 expired_pending
ka=$(ctl lease keep-alive --once "$id" 2>&1 || true)
after=$(ctl get k --consistency=s --print-value-only 2>&1 || true)
rm -f "$slow"
check "the keepalive is told the lease is gone ($ka)" grep -q 'requested lease not found' <<<"$ka"
check "and by then its key is gone (it got: '${after//$'\n'/ }')" [ -z "$after" ]
check "the lease is gone" bash -c "etcdctl --endpoints 127.0.0.1:$IT_CPORT lease timetolive $id | grep -q 'already expired'"
check "the member stops cleanly" it_cetcd_stop
it_summary
