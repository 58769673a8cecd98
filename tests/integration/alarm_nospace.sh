#!/usr/bin/env bash
# etcd's backend quota and NOSPACE alarm on one cetcd member, as etcd's
# TestCtlV3Alarm drives them up to its defragmentation:
#   - with --quota-backend-bytes of 16 pages, puts of a page each are
#     taken until one is refused with "etcdserver: mvcc: database space
#     exceeded";
#   - `etcdctl alarm list` then shows this member's NOSPACE alarm, /health
#     is false, a small put is refused too, a delete and a read still
#     work;
#   - the alarm survives a restart;
#   - disarmed while the db is still over the quota, the next put is
#     refused and raises it again;
#   - without a restart: the big key deleted, the history compacted, the
#     db defragmented (etcdctl defrag) and the alarm disarmed, puts are
#     taken again, and Status's dbSizeInUse is under the quota; Status's
#     dbSize is etcd's, the db's high-water mark (its meta page's pgid).
# Exits 77 when the programs or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init alarm-nospace

ctl() { etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "127.0.0.1:$IT_CPORT" "$@"; }
page=$(getconf PAGESIZE)
it_cetcd_start q "$IT_TMP/q" "$IT_TMP/q.log" --quota-backend-bytes $((16 * page))
it_wait_healthy "$IT_CPORT"
id=$(ctl endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["member_id"])')
check "a small put is taken" ctl put first small
big=$(head -c "$page" /dev/zero | tr '\0' b)
out="" puts=0
while ((puts < 200)); do
	out=$(ctl put big "$big" 2>&1) || break
	puts=$((puts + 1))
done
check "puts of a page are refused after $puts with etcd's error" \
	grep -q 'etcdserver: mvcc: database space exceeded' <<<"$out"
alarms() { ctl alarm list 2>/dev/null || true; }
# no_alarm: alarm list answers, with no alarm in it (a member that does
# not answer has not cleared anything)
no_alarm() {
	local a
	a=$(ctl alarm list) && [[ -z $a ]]
}
check "alarm list shows memberID:$id alarm:NOSPACE" grep -q "memberID:$id alarm:NOSPACE" <<<"$(alarms)"
check "/health is false" grep -q '"health":"false"' <<<"$(curl -s "http://127.0.0.1:$IT_CPORT/health")"
out=$(ctl put small x 2>&1 || true)
check "a small put is refused too" grep -q 'etcdserver: mvcc: database space exceeded' <<<"$out"
check "a read works" [ "$(ctl get first --print-value-only)" = small ]
check "a delete works" ctl del first
check "stored logged etcd's alarm line" it_log_has "$IT_TMP/q.log" '"msg":"alarm raised","alarm":"NOSPACE"' 1

it_cetcd_stop || true
it_cetcd_restart "$IT_TMP/q.log"
it_until 30000 bash -c "etcdctl --endpoints 127.0.0.1:$IT_CPORT get big --consistency=s >/dev/null 2>&1" || true
check "the alarm survives a restart" grep -q "memberID:$id alarm:NOSPACE" <<<"$(alarms)"

check "alarm disarm" ctl alarm disarm
check "the alarm is gone" no_alarm
out=$(ctl put small x 2>&1 || true)
check "over the quota still, the next put is refused" \
	grep -q 'etcdserver: mvcc: database space exceeded' <<<"$out"
check "and raises the alarm again" it_until 10000 bash -c \
	"etcdctl --endpoints 127.0.0.1:$IT_CPORT alarm list | grep -q 'memberID:$id alarm:NOSPACE'"

# recovery without a restart, as an operator does it
status() { ctl endpoint status -w json | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['Status']$1)"; }
check "the big key deleted" ctl del big
rev=$(status "['header']['revision']")
check "the history compacted" ctl compact "$rev" --physical
check "etcdctl defrag" ctl defrag
check "alarm disarm again" ctl alarm disarm
check "the alarm is gone again" no_alarm
check "a put is taken again" ctl put after-recovery small
check "and reads back" [ "$(ctl get after-recovery --print-value-only)" = small ]
inuse=$(status "['dbSizeInUse']")
check "dbSizeInUse ($inuse) is under the quota" test "$inuse" -lt $((16 * page))
check "no alarm came back" no_alarm
# dbSize as etcd's Status gives it: bbolt's Tx.Size(), the high-water
# mark (the newer meta page's pgid) times the page size, not the file's
# size; read from the file once stored checkpointed (idle, within 100 ms)
meta_size() {
	python3 - "$IT_TMP/q/member/snap/db" <<'PY'
import struct, sys
f = open(sys.argv[1], 'rb')
def meta(off):
    f.seek(off + 16)
    magic, _ver, psz, _fl = struct.unpack('<IIII', f.read(16))
    f.seek(off + 16 + 32)
    _free, pgid, txid = struct.unpack('<QQQ', f.read(24))
    return txid, pgid, psz
f.seek(16 + 8)
psz = struct.unpack('<I', f.read(4))[0]
txid, pgid, psz = max(meta(0), meta(psz))
print(pgid * psz)
PY
}
db_size_is_meta() { [[ $(status "['dbSize']") == "$(meta_size)" ]]; }
check "Status dbSize ($(status "['dbSize']")) is the high-water mark's bytes, not the file's ($(stat -c %s "$IT_TMP/q/member/snap/db"))" \
	it_until 5000 db_size_is_meta
it_cetcd_stop || true
it_summary
