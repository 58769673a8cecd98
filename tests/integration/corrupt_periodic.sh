#!/usr/bin/env bash
# --experimental-corrupt-check-time in a three-member cetcd cluster, as
# etcd 3.4's leader checks (etcdserver/corrupt.go checkHashKV):
#   - with the members in agreement, the leader's checks compare both
#     peers ("finished peer corruption check", two peers checked) and
#     raise no alarm;
#   - a follower stopped, its db changed offline as etcd's e2e test changes
#     it (tests/tools/corruptdb, on the real bbolt) and restarted without
#     the initial check: the leader finds its hash different at the same
#     revision and raises the CORRUPT alarm (member 0, as etcd 3.4), which
#     `etcdctl alarm list` shows on every member; puts are then refused
#     with "etcdserver: corrupt cluster" and /health is false; the alarm
#     survives a restart of the leader; `etcdctl alarm disarm` clears it.
# Exits 77 when the programs, etcdctl, python3 or Go with Debian's bbolt
# are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_go_tool corruptdb go.etcd.io/bbolt
CORRUPTDB=$IT_BUILD/tests/corruptdb
it_init corrupt-periodic

ctl() { etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }
it_cl_init corrupt-periodic 3
ep() { it_cl_ep "$1"; }
log_of() { it_cl_log "$1"; }
start() { it_cl_start "$1" cetcd --experimental-corrupt-check-time 1s; }
stop() { it_cl_stop "$1"; }
leader() { it_cl_leader; }
count() { it_count "$(log_of "$1")" "$2"; }
# no_alarm EP: alarm list at EP answers, and names no alarm (a member
# that does not answer lists nothing, and proves nothing).
no_alarm() {
	local a
	a=$(ctl --endpoints "$1" alarm list) && [[ $a != *alarm* ]]
}
corrupt_alarm_on() { grep -q 'alarm:CORRUPT' <<<"$(ctl --endpoints "$(ep "$1")" alarm list 2>/dev/null || true)"; }

for i in 0 1 2; do start "$i"; done
for i in 0 1 2; do
	it_wait_healthy "${IT_CL_CPORT[i]}" 60 || { fail "x$i answers"; it_summary; exit 1; }
done
for n in $(seq 1 20); do ctl --endpoints "$(ep 0)" put "k$n" "v$n" >/dev/null; done
check "the members agree" it_until 20000 it_same_state "$(ep 0)" "$(ep 1)" "$(ep 2)"
it_until 20000 leader >/dev/null
L=$(leader)
echo "  x$L leads"
check "the leader's monitor runs" it_until 10000 it_log_has "$(log_of "$L")" '"msg":"enabled corruption checking"' 1
check "the leader compares both peers and finds nothing" \
	it_until 15000 it_log_has "$(log_of "$L")" '"msg":"finished peer corruption check","number-of-peers-checked":2' 2
check "no alarm is raised while the members agree" no_alarm "$(ep "$L")"
check "no mismatch was logged" [ "$(count "$L" 'hashes must match')" = 0 ]

# corrupt a follower
F=$(((L + 1) % 3))
stop "$F"
check "corruptdb changes x$F's db offline" "$CORRUPTDB" "$IT_TMP/x$F/member/snap/db"
start "$F"
check "the corrupted follower x$F serves again" it_wait_healthy "${IT_CL_CPORT[F]}" 60
check "the leader finds the follower's hash different" \
	it_until 20000 it_log_has "$(log_of "$L")" '"msg":"same compact revision then hashes must match"' 1
check "the leader's stored raised the CORRUPT alarm" \
	it_until 10000 it_log_has "$(log_of "$L")" '"msg":"alarm raised","alarm":"CORRUPT","from":"0"' 1
for i in 0 1 2; do
	check "x$i lists memberID:0 alarm:CORRUPT" it_until 10000 corrupt_alarm_on "$i"
done
out=$(ctl --endpoints "$(ep "$L")" put after-corrupt x 2>&1 || true)
check "a put is refused: $out" grep -q 'etcdserver: corrupt cluster' <<<"$out"
check "/health is false" bash -c "curl -s http://$(ep "$L")/health | grep -q '\"health\":\"false\"'"

stop "$L"
start "$L"
# /health is false while the alarm is raised: a serializable read tells
# that the member answers
answers() { ctl --endpoints "$(ep "$1")" get k1 --consistency=s --print-value-only 2>/dev/null | grep -x v1 >/dev/null; }
check "the restarted leader x$L answers reads" it_until 60000 answers "$L"
check "the alarm survives its restart" it_until 20000 corrupt_alarm_on "$L"

# while the corrupted follower runs, the leader raises the alarm again at
# its next check (as etcd's does): take it out first
stop "$F"
check "etcdctl alarm disarm clears it" ctl --endpoints "$(ep "$L")" alarm disarm
O=$(((L + 2) % 3))
both_clear() { no_alarm "$(ep "$L")" && no_alarm "$(ep "$O")"; }
check "the members list no alarm afterwards" it_until 10000 both_clear
it_until 20000 leader >/dev/null
N=$(leader)
at=$(count "$N" '"msg":"finished peer corruption check"')
check "the leader x$N goes on checking" \
	it_until 20000 it_log_has "$(log_of "$N")" '"msg":"finished peer corruption check"' $((at + 2))
check "and no check raised it again without the corrupted member" both_clear
check "puts work again" ctl --endpoints "$(ep "$L")" put after-disarm y
for i in 0 1 2; do stop "$i"; done
it_summary
