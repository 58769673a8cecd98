#!/usr/bin/env bash
# --auto-compaction-mode and --auto-compaction-retention in a three-member
# cetcd cluster, as etcd 3.4's compactor schedules them
# (etcdserver/api/v3compactor; launcher/compactor.c):
#   - periodic, retention 2s (a Go duration): only the leader compacts,
#     with etcd's lines; after the writes stop at revision R it compacts
#     at R, and not before R was the store's revision for the 2 s of the
#     retention; every member then refuses reads below R;
#   - the leader moved (etcdctl move-leader): the old leader pauses, the
#     new one compacts the revisions written since;
#   - revision, retention 5, the 5-minute interval cut to 500 ms through
#     the test-only variable: the leader compacts at the current
#     revision minus 5, the followers never.
# Exits 77 when the programs, etcdctl or python3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init auto-compaction

ctl() { etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }
it_cl_init auto-compaction 3
ep() { it_cl_ep "$1"; }
log_of() { it_cl_log "$1"; }
count() { it_count "$(log_of "$1")" "$2"; }
rev_of() { ctl --endpoints "$(ep "$1")" get nothing -w json | python3 -c 'import json, sys; print(json.load(sys.stdin)["header"]["revision"])'; }
puts() { # puts I N PREFIX: N puts through member I
	local n
	for n in $(seq 1 "$2"); do ctl --endpoints "$(ep "$1")" put "$3$n" "v$n" >/dev/null; done
}
# compacted I R: member I refuses a read at R - 1 as compacted and serves R
compacted() {
	local out
	out=$(ctl --endpoints "$(ep "$1")" get k1 --rev=$(($2 - 1)) 2>&1 || true)
	grep -q 'required revision has been compacted' <<<"$out" &&
		ctl --endpoints "$(ep "$1")" get k1 --rev="$2" >/dev/null
}
# ms_of LOG REGEX: the time (ms since the epoch) of the first line of LOG
# matching REGEX
ms_of() {
	local ts
	ts=$(grep -m1 -E -- "$2" "$1" | sed -E 's/.*"ts":"([^"]+)".*/\1/')
	[[ -n $ts ]] && date -d "$ts" +%s%3N
}
start_all() {
	local i
	for i in 0 1 2; do it_cl_start "$i" cetcd "$@"; done
	for i in 0 1 2; do it_cl_answers "$i" || { it_summary; exit 1; }; done
}

# ---------------------------------------------------------------- periodic
start_all --auto-compaction-mode periodic --auto-compaction-retention 2s
L=$(it_cl_current_leader)
echo "  x$L leads"
check "the leader's auto-compactor runs, every tenth of the retention" \
	it_until 10000 it_log_has "$(log_of "$L")" '"msg":"enabled auto compaction","auto-compaction-mode":"periodic","auto-compaction-retention":"2s","interval":"200ms"' 1
puts "$L" 10 k
R1=$(rev_of "$L")
t1=$(it_now_ms)
line1="\"msg\":\"completed auto periodic compaction\",\"revision\":$R1,\"compact-period\":\"2s\""
check "the leader compacts at R1=$R1, the revision the writes stopped at" \
	it_until 10000 it_log_has "$(log_of "$L")" "$line1" 1
check "with etcd's starting line first" \
	it_log_has "$(log_of "$L")" "\"msg\":\"starting auto periodic compaction\",\"revision\":$R1,\"compact-period\":\"2s\"" 1
at=$(ms_of "$(log_of "$L")" "$line1")
check "not before R1 was the store's revision for the retention (2 s; after $((at - t1)) ms)" \
	test "$((at - t1))" -ge 1900
check "no compaction ever went past R1" \
	bash -c "! grep -E '\"msg\":\"completed auto periodic compaction\",\"revision\":[0-9]+' '$(log_of "$L")' |
		sed -E 's/.*\"revision\":([0-9]+).*/\\1/' | awk '\$1 > $R1 { bad = 1 } END { exit !bad }'"
for i in 0 1 2; do
	check "x$i refuses reads below R1 and serves R1" it_until 5000 compacted "$i" "$R1"
done
for i in $(it_cl_but "$L"); do
	check "follower x$i never compacted" test "$(count "$i" 'auto periodic compaction')" = 0
done

# ------------------------------------------------------ the leader moves
F=$(((L + 1) % 3))
ctl --endpoints "$(ep "$L")" move-leader "$(it_member_id "$(ep "$F")")" >/dev/null
check "x$F leads after move-leader" it_until 10000 it_leads "$(ep "$F")"
sleep 0.5 # a round of the old leader's already under way ends
before=$(count "$L" 'starting auto periodic compaction')
puts "$F" 10 m
R2=$(rev_of "$F")
check "the new leader x$F compacts at R2=$R2" \
	it_until 10000 it_log_has "$(log_of "$F")" "\"msg\":\"completed auto periodic compaction\",\"revision\":$R2," 1
check "the old leader x$L paused: no compaction since it stopped leading" \
	test "$(count "$L" 'starting auto periodic compaction')" = "$before"
check "x$L refuses reads below R2 too" it_until 5000 compacted "$L" "$R2"
it_cl_stop 0 1 2

# ---------------------------------------------------------------- revision
export CETCD_TEST_ONLY_REVISION_COMPACTION_INTERVAL_MS=500
start_all --auto-compaction-mode revision --auto-compaction-retention 5
unset CETCD_TEST_ONLY_REVISION_COMPACTION_INTERVAL_MS
L=$(it_cl_current_leader)
echo "  x$L leads"
puts "$L" 12 r
R3=$(rev_of "$L")
check "the leader compacts at R3 - 5 = $((R3 - 5)), with etcd's lines" \
	it_until 10000 it_log_has "$(log_of "$L")" "\"msg\":\"completed auto revision compaction\",\"revision\":$((R3 - 5)),\"revision-compaction-retention\":5" 1
check "after its starting line" \
	it_log_has "$(log_of "$L")" "\"msg\":\"starting auto revision compaction\",\"revision\":$((R3 - 5)),\"revision-compaction-retention\":5" 1
check "x$L refuses reads below R3 - 5" it_until 5000 compacted "$L" "$((R3 - 5))"
sleep 1.2 # two more rounds: nothing new to compact, nothing logged
check "a revision is compacted once" \
	test "$(count "$L" "\"msg\":\"starting auto revision compaction\",\"revision\":$((R3 - 5)),")" = 1
for i in $(it_cl_but "$L"); do
	check "follower x$i never compacted" test "$(count "$i" 'auto revision compaction')" = 0
done
it_cl_stop 0 1 2
it_summary
