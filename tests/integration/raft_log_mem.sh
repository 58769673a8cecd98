#!/usr/bin/env bash
# The applied Raft log raftd keeps in memory (raftd/retain.h), read from
# cetcd_raft_log_bytes on /metrics (the bytes of the entries raftd holds)
# and cetcd_raft_log_resident_bytes (of which entry data in memory):
#  1. A member alone keeps next to nothing it has applied: after 12,000
#     single puts of 4 KiB (about 47 MiB of entries), and after 12,000
#     more, it holds entries (16 at least) but less than a compaction
#     step (4 MiB) and 16 entries more; raftd's private resident memory
#     (RssAnon), which freed entries leave only in the allocator's time,
#     stays under 80 MiB of the 94 MiB put, a loose bound (etcd's rule,
#     every entry since the last compaction, keeps them all: 124 MiB).
#     Each load is followed by a pause and one more put (settle), so that
#     raftd looks again once stored made the load durable.
#  2. Three cetcd members with --raft-log-mib 4: a follower killed
#     (SIGKILL) while 320 puts of 256 KiB (80 MiB) go through the leader
#     falls past what the leader keeps for it; the leader's log is then
#     within the 4 MiB. Restarted, the follower catches up by a snapshot
#     (the leader's and its log say so) and all members agree on
#     revision, raft index and HashKV, each log within the 4 MiB. Killed
#     again for 200 small puts and restarted, it catches up from the log:
#     no second snapshot.
#  3. A member alone after 2,000 puts: a member added then (etcdctl member
#     add, then started with --initial-cluster-state existing) catches up
#     by a snapshot, the log it would have needed being gone, and both
#     agree on revision, raft index and HashKV.
#  4. Three cetcd members with the default --raft-log-mib (64): a follower
#     killed (SIGKILL) while 160 puts of 256 KiB (40 MiB) go through the
#     leader, well within the budget: the leader keeps every entry for it
#     (its log over 40 MiB) but holds at most 4 MiB of their data and one
#     entry more (RETAIN_RESIDENT_BYTES), the rest in its WAL only; its
#     raftd's RssAnon grows less than 32 MiB of the 40 MiB put (a loose
#     bound: holding the data, it would grow by 40 MiB). Restarted, the
#     follower catches up from the log, its data read back from the
#     leader's WAL: no snapshot (no member's log says so), no failed read
#     back, and all members agree on revision, raft index and HashKV.
# Exits 77 when the programs, etcdctl, python3 or Go with Debian's etcd
# packages are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_go_tool bigrange go.etcd.io/etcd/etcdserver/etcdserverpb
BR=$IT_BUILD/tests/bigrange
it_init raft-log-mem

# kib PID FIELD: a figure of /proc/PID/status (VmRSS, RssAnon...), in KiB.
kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
# load EP PREFIX N SIZE: N single puts (one Raft entry each) of SIZE
# bytes, from 8 clients at once.
load() {
	local ep=$1 prefix=$2 n=$3 size=$4 i rc=0
	local -a pids=()
	for i in 0 1 2 3 4 5 6 7; do
		it_bg "$IT_TMP/load.$prefix$i.out" "$BR" load -endpoint "$ep" -prefix "$prefix$i" \
			-n $((n / 8)) -size "$size" -batch 1
		pids+=("$IT_BG_PID")
	done
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	return $rc
}

# settle EP: a pause for stored's checkpoint (every 100 ms), then one put:
# raftd drops entries only right after it hands out new ones, and only
# those stored made durable, so what a load leaves is looked at again.
settle() {
	sleep 0.5
	etcdctl --endpoints "$1" --dial-timeout 2s --command-timeout 10s put settle x >/dev/null
	sleep 0.3
}

# logbytes EP: the member's cetcd_raft_log_bytes, raftd's log in memory.
logbytes() {
	curl -sf "http://$1/metrics" | awk '$1 == "cetcd_raft_log_bytes" { printf "%d\n", $2 }'
}
# resident EP: the member's cetcd_raft_log_resident_bytes, the data of
# its log's entries raftd holds in memory (the rest is in the WAL only).
resident() {
	curl -sf "http://$1/metrics" | awk '$1 == "cetcd_raft_log_resident_bytes" { printf "%d\n", $2 }'
}
# three NAME LETTER PART [FLAG...]: three cetcd members (it_cl_init NAME
# 3 LETTER) started with the FLAGs, a first put through the leader, all
# agreeing (checks of part PART); sets lead, lag (a follower), lep (the
# leader's endpoint) and eps.
three() {
	local name=$1 letter=$2 part=$3 i
	shift 3
	it_cl_init "$name" 3 "$letter"
	for i in 0 1 2; do it_cl_start $i cetcd "$@"; done
	for i in 0 1 2; do it_cl_answers $i || exit 1; done
	lead=$(it_until 15000 it_cl_leader) || lead=0
	lag=$(((lead + 1) % 3))
	lep=$(it_cl_ep "$lead")
	eps=("$(it_cl_ep 0)" "$(it_cl_ep 1)" "$(it_cl_ep 2)")
	check "$part: a first put goes through" load "$lep" w 8 1024
	check "$part: all members agree" it_agreed 20000 it_same_state "${eps[@]}"
}

# within LOW HIGH V: LOW < V <= HIGH (V read, not empty).
within() { [[ -n $3 ]] && (($1 < $3 && $3 <= $2)); }

# 1. alone
it_cetcd_start a1 "$IT_TMP/a1" "$IT_TMP/a1.log" --gateways 1
check "1: the member answers" it_wait_healthy "$IT_CPORT" 30
ep=127.0.0.1:$IT_CPORT
raftd=$(it_cetcd_child raftd)
anon0=$(kib "$raftd" RssAnon)
# a compaction step (RETAIN_STEP_BYTES) and the floor of 16 entries
# (RETAIN_FLOOR_ENTRIES) of 4 KiB with their slots
alone=$(((4 << 20) + 16 * 8192))
check "1: 12,000 puts of 4 KiB" load "$ep" a 12000 4096
settle "$ep"
log1=$(logbytes "$ep")
check "1: raftd's log holds entries, but less than 4 MiB and 16 more ($log1 bytes)" \
	within 0 "$alone" "$log1"
check "1: 12,000 more" load "$ep" b 12000 4096
settle "$ep"
log2=$(logbytes "$ep")
check "1: and so after 94 MiB of puts ($log2 bytes)" within 0 "$alone" "$log2"
anon2=$(kib "$raftd" RssAnon)
echo "  raftd's RssAnon: $anon0 KiB at start, $anon2 after 94 MiB (VmHWM $(kib "$raftd" VmHWM) KiB)"
check "1: raftd's RssAnon grew less than 80 MiB of the 94 MiB put" \
	test $((anon2 - anon0)) -lt $((80 << 10))
it_cetcd_stop

# 2. three members, a follower far behind
three rlm m 2 --raft-log-mib 4
it_cl_kill "$lag"
check "2: 320 puts of 256 KiB while s$lag is down" load "$lep" x 320 262144
# the log keeps 16 entries below stored's durable point whatever their
# size (RETAIN_FLOOR_ENTRIES): small puts first take the last big ones' place
settle "$lep"
check "2: 32 small puts" load "$lep" s 32 100
settle "$lep"
budget=$((4 << 20))
llog=$(logbytes "$lep")
check "2: the leader's log holds entries, within the 4 MiB ($llog bytes)" within 0 "$budget" "$llog"
it_until 10000 it_gone "${IT_CL_PIDS[lag]}"
it_cl_start "$lag" cetcd --raft-log-mib 4
check "2: the leader sent s$lag a snapshot" \
	it_wait_log "$(it_cl_log "$lead")" '"msg":"sent database snapshot"' 60
check "2: s$lag applied it" it_wait_log "$(it_cl_log "$lag")" '"msg":"applying snapshot"' 60
check "2: all members agree on revision and raft index" it_agreed 60000 it_same_state "${eps[@]}"
check "2: and on HashKV" it_agreed 20000 it_same_hashkv "${eps[@]}"
settle "$lep"
for i in 0 1 2; do
	v=$(logbytes "${eps[i]}")
	check "2: s$i's log holds entries, within the 4 MiB ($v bytes)" within 0 "$budget" "$v"
done
it_cl_kill "$lag"
check "2: 200 puts of 1 KiB while s$lag is down again" load "$lep" y 200 1024
it_until 10000 it_gone "${IT_CL_PIDS[lag]}"
it_cl_start "$lag" cetcd --raft-log-mib 4
check "2: all members agree again" it_agreed 60000 it_same_state "${eps[@]}"
sends=$(it_count "$(it_cl_log "$lead")" '"msg":"sent database snapshot"')
check "2: s$lag caught up from the log (snapshots sent: $sends)" test "$sends" = 1
check "2: no member logged an error" \
	test "$(cat "${IT_CL_LOG[@]}" | it_count /dev/stdin '"level":"error"')" = 0
it_cl_stop 0 1 2

# 3. a member added to a member alone
it_cl_init rlmj 2 j
IT_CL_INITIAL=$(it_cl_initial 0)
it_cl_start 0 cetcd
it_cl_answers 0 || exit 1
check "3: 2,000 puts of 1 KiB to j0 alone" load "$(it_cl_ep 0)" z 2000 1024
settle "$(it_cl_ep 0)"
check "3: j1 added" grep -q "added to cluster" \
	<(it_cl_ctl 0 member add j1 --peer-urls "$(it_cl_purl 1)")
it_cl_join 1 cetcd "$(it_cl_initial 0 1)"
it_cl_answers 1 || exit 1
check "3: j0 sent j1 a snapshot" it_wait_log "$(it_cl_log 0)" '"msg":"sent database snapshot"' 30
check "3: j1 applied it" it_wait_log "$(it_cl_log 1)" '"msg":"applying snapshot"' 30
check "3: both agree on revision and raft index" \
	it_agreed 30000 it_same_state "$(it_cl_ep 0)" "$(it_cl_ep 1)"
check "3: and on HashKV" it_agreed 20000 it_same_hashkv "$(it_cl_ep 0)" "$(it_cl_ep 1)"
it_cl_stop 0 1

# 4. three members, a follower behind within the budget
three rlmr r 4
raftd=$(IT_CETCD_PID=${IT_CL_PIDS[lead]} it_cetcd_child raftd)
anon0=$(kib "$raftd" RssAnon)
# killed, s$lag stays in the leader's progress at the match it had, and
# the entries since are within the catch-up margin (5000) and the budget
it_cl_kill "$lag"
# in 4 loads of 40 puts, each followed by settle, so that at most 10 MiB
# wait for stored to make them durable at a time, whatever its pace
for k in 0 1 2 3; do
	check "4: 40 puts of 256 KiB while s$lag is down ($((k + 1)) of 4)" load "$lep" x$k 40 262144
	settle "$lep"
done
llog=$(logbytes "$lep")
check "4: the leader keeps them all for s$lag: its log holds over 40 MiB ($llog bytes)" \
	within $((160 << 18)) $((64 << 20)) "$llog"
# raftd drops the data of entries stored made durable once it holds over
# 4 MiB (RETAIN_RESIDENT_BYTES), down to 3 MiB, and looks again each time
# it hands out entries: after settle, at most 4 MiB of those, and what
# stored may still need, the settle put and at most one put of 256 KiB
# (a KiB for its key and the request around it)
most=$(((4 << 20) + (257 << 10)))
# kept V R: a log of V bytes holds the 160 puts (over 40 MiB, within the
# 64 MiB), R bytes of their data in memory (at most $most).
kept() { within $((160 << 18)) $((64 << 20)) "$1" && within 0 "$most" "$2"; }
lres=$(resident "$lep")
check "4: but holds at most 4 MiB and one entry of their data ($lres bytes)" within 0 "$most" "$lres"
anon1=$(kib "$raftd" RssAnon)
echo "  the leader's raftd's RssAnon: $anon0 KiB before, $anon1 after 40 MiB (VmHWM $(kib "$raftd" VmHWM) KiB)"
# a loose bound: what waited for stored, the 4 MiB kept and what freed
# data leaves in the allocator grow it by 14 to 21 MiB here; were all
# the data held, it would grow by more than 40 MiB
check "4: its RssAnon grew less than 32 MiB of the 40 MiB put" test $((anon1 - anon0)) -lt $((32 << 10))
it_until 10000 it_gone "${IT_CL_PIDS[lag]}"
it_cl_start "$lag" cetcd
check "4: all members agree on revision and raft index" it_agreed 60000 it_same_state "${eps[@]}"
check "4: and on HashKV" it_agreed 20000 it_same_hashkv "${eps[@]}"
sends=$(cat "${IT_CL_LOG[@]}" | it_count /dev/stdin '"msg":"sent database snapshot"')
applied=$(cat "${IT_CL_LOG[@]}" | it_count /dev/stdin '"msg":"applying snapshot"')
check "4: s$lag caught up from the log (snapshots sent: $sends, applied: $applied)" \
	test "$sends/$applied" = 0/0
check "4: the leader read every entry it sent back from its WAL" \
	test "$(it_count "$(it_cl_log "$lead")" 'cannot read a Raft entry back from the WAL')" = 0
settle "$lep"
for i in 0 1 2; do
	v=$(logbytes "${eps[i]}")
	r=$(resident "${eps[i]}")
	check "4: s$i's log holds the 40 MiB ($v bytes), at most 4 MiB and one entry of it in memory ($r bytes)" \
		kept "$v" "$r"
done
check "4: no member logged an error" \
	test "$(cat "${IT_CL_LOG[@]}" | it_count /dev/stdin '"level":"error"')" = 0
it_cl_stop 0 1 2
it_summary
