#!/usr/bin/env bash
# Alarms and --experimental-initial-corrupt-check across a mixed cluster:
# Debian's
# etcd 3.4 (x0) and two cetcd members (x1, x2) on etcd's peer protocol.
# etcd asks its peers for their HashKV with GET /members/hashkv on their
# peer URLs, and so does cetcd's launcher:
#   - an alarm raised through one kind of member (CORRUPT, NOSPACE for a
#     member) is listed by the other, refuses puts there with etcd's
#     error, and `etcdctl alarm disarm` through the other clears it;
#   - with the data in agreement, etcd restarted with the check passes it
#     against the cetcd peers ("initial corruption checking passed"), and
#     so does a cetcd member restarted with it against etcd and cetcd;
#   - a cetcd member whose db was changed offline as etcd's e2e test
#     changes it (tests/tools/corruptdb, on the real bbolt) refuses to
#     start with etcd's error, its peers etcd and cetcd both differing;
#   - etcd, its db changed the same way, refuses to start with its own
#     error, having asked the cetcd peer.
# Exits 77 when the programs, Debian's etcd and etcdctl, python3 or Go
# with Debian's bbolt are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_build_go_tool corruptdb go.etcd.io/bbolt
CORRUPTDB=$IT_BUILD/tests/corruptdb
it_build_go_tool alarmctl go.etcd.io/etcd/clientv3
ALARMCTL=$IT_BUILD/tests/alarmctl
it_init corrupt-mixed

ctl() { etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }
kinds=(etcd cetcd cetcd)
it_cl_init corrupt-mixed 3
ep() { it_cl_ep "$1"; }
log_of() { it_cl_log "$1"; }
# start I [flags...]: member I of its kind; etcd loads its peers at a
# restart from its last snapshot, so it takes one every 3 entries
start() {
	local i=$1
	shift
	if [[ ${kinds[i]} == etcd ]]; then
		it_cl_start "$i" etcd --logger zap --log-outputs stderr --snapshot-count 3 "$@"
	else
		it_cl_start "$i" cetcd "$@"
	fi
}
stop() { it_cl_stop "$1"; }
# exits_with I TEXT: member I's process ended by itself within 30 s, and
# its log since the mark has TEXT.
exits_with() {
	it_wait_gone "${IT_CL_PIDS[$1]}" 30000 || return 1
	tail -c +"$2" "$(log_of "$1")" | grep -- "$3" >/dev/null
}
mark() { echo $(($(stat -c %s "$(log_of "$1")") + 1)); }

for i in 0 1 2; do start "$i"; done
for i in 0 1 2; do
	it_wait_healthy "${IT_CL_CPORT[i]}" 60 || { fail "x$i (${kinds[i]}) answers"; it_summary; exit 1; }
done
ok "the three members answer"
for n in $(seq 1 20); do ctl --endpoints "$(ep 1)" put "k$n" "v$n" >/dev/null; done
check "every member has the same state" it_until 20000 it_same_state "$(ep 0)" "$(ep 1)" "$(ep 2)"
check "every member has the same HashKV" it_until 20000 it_same_hashkv "$(ep 0)" "$(ep 1)" "$(ep 2)"

# alarms raised on one kind of member are the other's: Raft carries them
alarms_of() { ctl --endpoints "$(ep "$1")" alarm list 2>/dev/null || true; }
lists() { grep -q -- "$2" <<<"$(alarms_of "$1")"; }
refused() {
	local out
	out=$(ctl --endpoints "$(ep "$1")" put alarm-test x 2>&1) || true
	grep -q -- "$2" <<<"$out" || { echo "  (the put answered: ${out##*$'\n'})"; return 1; }
}
# clear_on I: member I answers alarm list, with no alarm in it
clear_on() {
	local a
	a=$(ctl --endpoints "$(ep "$1")" alarm list) && [[ $a != *alarm* ]]
}
check "CORRUPT raised through cetcd (x1)" "$ALARMCTL" -endpoint "$(ep 1)" -action activate -alarm CORRUPT -member 0
check "etcd (x0) lists it" it_until 10000 lists 0 'alarm:CORRUPT'
check "etcd refuses a put: etcdserver: corrupt cluster" refused 0 'etcdserver: corrupt cluster'
check "etcdctl alarm disarm through etcd" ctl --endpoints "$(ep 0)" alarm disarm
check "cetcd (x2) lists no alarm then" it_until 10000 clear_on 2
id2=$(ctl --endpoints "$(ep 2)" endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["member_id"])')
check "NOSPACE for x2 raised through etcd (x0)" "$ALARMCTL" -endpoint "$(ep 0)" -action activate -alarm NOSPACE -member "$id2"
check "cetcd (x1) lists memberID:$id2 alarm:NOSPACE" it_until 10000 lists 1 "memberID:$id2 alarm:NOSPACE"
check "cetcd refuses a put: etcdserver: mvcc: database space exceeded" \
	refused 1 'etcdserver: mvcc: database space exceeded'
check "/health of cetcd is false while it is raised" \
	bash -c "curl -s http://$(ep 1)/health | grep -q '\"health\":\"false\"'"
check "etcdctl alarm disarm through cetcd (x1)" ctl --endpoints "$(ep 1)" alarm disarm
check "etcd (x0) lists no alarm then" it_until 10000 clear_on 0
check "puts work again" ctl --endpoints "$(ep 0)" put after-alarms y

# passes I WHAT: member I, restarted with the check and its data in
# agreement with its peers', passes it, serves, and had every peer answer
# with the same hash.
passes() {
	local i=$1 what=$2 m
	stop "$i"
	m=$(mark "$i")
	start "$i" --experimental-initial-corrupt-check
	check "$what passes the initial check" \
		it_until 30000 bash -c "tail -c +$m '$(log_of "$i")' | grep -q 'initial corruption checking passed; no corruption'"
	check "$what serves after it" it_wait_healthy "${IT_CL_CPORT[i]}" 60
	check "$what got an answer from every peer" \
		bash -c "! tail -c +$m '$(log_of "$i")' | grep -q 'failed hash kv request'"
	check "$what logged no hash mismatch" \
		bash -c "! tail -c +$m '$(log_of "$i")' | grep -q 'found different hash'"
}
passes 0 "etcd (x0), asking the cetcd peers,"
passes 1 "cetcd (x1), asking etcd and cetcd,"

# a cetcd member with a corrupted db
stop 1
check "corruptdb changes cetcd's db offline" "$CORRUPTDB" "$IT_TMP/x1/member/snap/db"
m=$(mark 1)
start 1 --experimental-initial-corrupt-check
id1=$(python3 -c 'import sys; print("%016x" % int(sys.argv[1]))' \
	"$(ctl --endpoints "$(ep 2)" member list -w json | python3 -c 'import json,sys
print([m["ID"] for m in json.load(sys.stdin)["members"] if m["name"] == "x1"][0])')")
check "cetcd refuses to start with etcd's error (etcdmain: $id1 found data inconsistency with peers)" \
	exits_with 1 "$m" "etcdmain: $id1 found data inconsistency with peers"
check "cetcd saw both peers (etcd and cetcd) differ" \
	[ "$(tail -c +"$m" "$(log_of 1)" | grep -c 'found different hash values from remote peer')" = 2 ]

# etcd with a corrupted db, its cetcd peer x2 up (x1 down)
stop 0
check "corruptdb changes etcd's db offline" "$CORRUPTDB" "$IT_TMP/x0/member/snap/db"
m=$(mark 0)
start 0 --experimental-initial-corrupt-check
check "etcd refuses to start: found data inconsistency with peers" \
	exits_with 0 "$m" "found data inconsistency with peers"
check "etcd found the cetcd peer's hash different" \
	bash -c "tail -c +$m '$(log_of 0)' | grep 'found different hash values from remote peer' | grep -q '${IT_CL_PPORT[2]}'"
stop 2
it_summary
