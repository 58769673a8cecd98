#!/usr/bin/env bash
# A member whose disk fills up under load, and recovers once space is
# freed. The data dir lies on a small tmpfs of its own, mounted in a
# private mount namespace (the test runs itself again under unshare -m).
# Writers (tests/tools/kvclient, 4 KiB values) put fresh keys and record
# every acknowledged put; then a filler file takes every free byte of the
# file system. When the db can grow no more, stored must say so, naming
# the db and what to do (free space), and nothing may be lost: puts wait
# (or fail with clean gRPC errors, or the client's deadline) while the
# disk is full, none acknowledged before is lost, and no process exits
# in a way the launcher gives up on (stored exits and is restarted with
# a backoff). While the db has no room, a new put is refused at once with
# etcd's NoSpace ("etcdserver: mvcc: database space exceeded": stored
# publishes the db's lack of space in its status record and gatewayd
# refuses new writes before proposing them), and stored says so once per
# episode. Once the filler is removed, writes are acknowledged again
# (after stored's restart and replay), stored says there is space again,
# a new put is taken and the refused one was never applied. At the end
# the db passes bbolt's own check (tests/tools/boltcheck) and every
# acknowledged put is there, also after a stop and a start. Then the disk
# fills up again and the member is stopped and started while it is full:
# once space is freed it answers, takes writes again and has every
# acknowledged put.
# Exits 77 when not root (the mount needs it), without unshare, or when
# the programs, etcdctl, python3, curl or Go with Debian's clientv3 and
# bbolt are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_mount_ns "mounting a small tmpfs for the data dir" "$@"
it_build_kvclient
it_build_go_tool boltcheck go.etcd.io/bbolt
BOLTCHECK=$IT_BUILD/tests/boltcheck
it_init full-disk

# The WAL preallocates two 64 MB segments (the tail and the next one):
# the file system holds them and some room for the db.
disk=$IT_TMP/disk
it_tmpfs "$disk" 176m
data=$disk/data
db=$data/member/snap/db
log=$IT_TMP/cetcd.log
filler=$disk/filler

it_cetcd_start t1 "$data" "$log"
it_member_answers "$IT_CPORT" "$log" "the member answers with its data dir on a $(df -h --output=size "$disk" | tail -1 | tr -d ' ') tmpfs" ||
	{ it_summary; exit 1; }
ep=127.0.0.1:$IT_CPORT

acks=$IT_TMP/acks
it_kv_start "$IT_TMP/writer.out" write -endpoint "$ep" -prefix fd/run1 -acks "$acks" \
	-writers 4 -per-conn 2 -value-size 4096
w=$IT_KV_PID
check "writers get acknowledgements" it_wait_lines "$acks" 300 30

# fill every free byte (dd stops at ENOSPC)
dd if=/dev/zero of="$filler" bs=1M 2>"$IT_TMP/dd.out" || true
check "the filler took the file system's free space ($(du -m "$filler" | cut -f1) MB)" \
	grep -q 'No space left on device' "$IT_TMP/dd.out"
full_at=$(it_lines "$acks")
echo "  the disk is full at $full_at acknowledged puts"

hint='"msg":"no space left for the db: free space on the disk that holds it'
check "stored says the db has no space, and to free space on its disk" it_wait_log "$log" "$hint" 120
check "the line names the db file" it_wait_log "$log" "$hint.*\"path\":\"$db\"" 5
check "the launcher restarts stored, which applies again from its last checkpoint" \
	it_wait_log "$log" '"msg":"restarting process","process":"stored"' 30
check "the launcher keeps the member: no process is given up on" \
	test "$(it_count "$log" 'cannot run with this configuration')" -eq 0
check "the launcher still runs" kill -0 "$IT_CETCD_PID"
check "no process crashed (no signal ended one)" \
	test "$(it_count "$log" '"msg":"process exited".*"signal"')" -eq 0

# A new put: refused with NoSpace within its command timeout, not left to
# time out. The flag is set at stored's first failure and kept across its
# restarts; a few tries are allowed for a batch that fit in the db's free
# pages and cleared it meanwhile (a try that was proposed then waits out
# its 10 s).
out_of_space='"msg":"the db is out of space: gateways refuse new writes'
space_again='"msg":"the db has space again: gateways take new writes'
nospace='etcdserver: mvcc: database space exceeded'
probe=0
probe_ms=0
probe_refused() {
	local out t0
	probe=$((probe + 1))
	t0=$(it_now_ms)
	out=$(timeout 30 etcdctl --endpoints "$ep" --dial-timeout 2s --command-timeout 10s \
		put "nospace/probe-$probe" v 2>&1) && return 1
	probe_ms=$(($(it_now_ms) - t0))
	[[ $out == *"$nospace"* ]] && return 0
	echo "  (put $probe: $out)"
	return 1
}
check "stored says the db is out of space and gateways refuse new writes" \
	it_wait_log "$log" "$out_of_space.*\"path\":\"$db\"" 30
check "the restarted stored finds no room either" it_wait_log "$log" "$hint" 60 2
check "and says nothing more of it: one line per episode, not per failure ($(it_count "$log" "$out_of_space") for $(it_count "$log" "$hint") failures)" \
	test "$(it_count "$log" "$out_of_space")" -eq 1
check "a new put is refused with \"$nospace\"" it_until 60000 probe_refused
check "at once: well within its 10 s command timeout (took $probe_ms ms, try $probe)" \
	test "$probe_ms" -lt 5000

rm -f "$filler"
at=$(it_lines "$acks")
check "with space freed, writes are acknowledged again (200 more after $at)" \
	it_wait_lines "$acks" $((at + 200)) 90
check "the writers saw no violation (clean errors only, revisions grow per writer)" \
	it_kv_stop "$w" "$IT_TMP/writer.out" '-error |^violation '
check "stored says the db has space again" it_wait_log "$log" "$space_again" 30
check "a new put is taken again (the flag is gone)" \
	etcdctl --endpoints "$ep" --command-timeout 10s put nospace/after v
check "the refused put was never applied" \
	test -z "$(etcdctl --endpoints "$ep" --command-timeout 10s get "nospace/probe-$probe" 2>&1)"
sets=$(it_count "$log" "$out_of_space")
clears=$(it_count "$log" "$space_again")
check "one line when space runs out and one when it is back, per episode ($sets, $clears; stored restarted $(it_count "$log" '"msg":"restarting process","process":"stored"') times)" \
	test "$sets" -ge 1 -a "$sets" -eq "$clears"
n=$(it_lines "$acks")
echo "  $n acknowledged puts; stored ran $(it_count "$log" '"msg":"restarting process","process":"stored"') restart(s)"
check "all $n acknowledged puts are there (value, mod revision)" it_acked_at "$ep" fd "$acks" "$n"
check "stored's line came from the db's file system, not a crash: no process was killed" \
	test "$(it_count "$log" '"signal":"Killed"')" -eq 0

st=0
it_cetcd_stop || st=$?
check "SIGTERM stops the member (exit 0)" test "$st" -eq 0
check "bbolt checks the db and finds it sound" "$BOLTCHECK" "$db"
it_cetcd_restart "$IT_TMP/cetcd2.log"
it_member_answers "$IT_CPORT" "$IT_TMP/cetcd2.log" "the member starts again on the same data dir" &&
	check "all $n acknowledged puts are there after the restart" it_acked_at "$ep" fd "$acks" "$n"

# ------------------------- a stop and a start while the disk is full
acks2=$IT_TMP/acks2
it_kv_start "$IT_TMP/writer2.out" write -endpoint "$ep" -prefix fd/run2 -acks "$acks2" \
	-writers 4 -per-conn 2 -value-size 4096
w=$IT_KV_PID
check "writers get acknowledgements again" it_wait_lines "$acks2" 200 30
dd if=/dev/zero of="$filler" bs=1M 2>/dev/null || true
check "the disk fills up again" it_wait_log "$IT_TMP/cetcd2.log" "$hint" 120
st=0
it_cetcd_stop || st=$?
check "SIGTERM stops the member on the full disk (status $st)" test "$st" -ne 124
it_cetcd_restart "$IT_TMP/cetcd3.log"
check "the member starts on the full disk: stored opens the db or says there is no space" \
	it_wait_log "$IT_TMP/cetcd3.log" '"logger":"stored".*("msg":"opened the db"|"msg":"no space left for the db)' 60
rm -f "$filler"
it_member_answers "$IT_CPORT" "$IT_TMP/cetcd3.log" "with space freed, the member started on the full disk answers" || true
at=$(it_lines "$acks2")
check "and writes are acknowledged again (200 more after $at)" it_wait_lines "$acks2" $((at + 200)) 90
check "the writers saw no violation" it_kv_stop "$w" "$IT_TMP/writer2.out" '-error |^violation '
check "the launcher gave up on no process" \
	test "$(it_count "$IT_TMP/cetcd3.log" 'cannot run with this configuration')" -eq 0
n2=$(it_lines "$acks2")
check "all $((n + n2)) acknowledged puts of both runs are there" \
	it_acked_at "$ep" fd "$acks,$acks2" $((n + n2))
st=0
it_cetcd_stop || st=$?
check "SIGTERM stops the member (exit 0)" test "$st" -eq 0
check "bbolt checks the db again and finds it sound" "$BOLTCHECK" "$db"
it_summary
