#!/usr/bin/env bash
# Nothing acknowledged is lost when a crash drops or tears every write
# since the last completed sync. The member runs with its WAL and db on
# the disk I/O layer's fault backend with crash journals
# (CETCD_TEST_DISKIO_FAULT=file=both,crashlog, base/diskio/diskio.h):
# beside each file, the undo record of every write since its last sync.
# A writer (tests/tools/kvclient) records every acknowledged put; at a
# random moment raftd, stored or the whole member is SIGKILLed (for a
# single process the launcher is stopped first, so that it restarts the
# process only afterwards), tests/tools/crashrevert turns each journaled
# file of the killed processes into what a power cut could have left
# (drop: every unsynced write lost; random: each kept, lost or torn at a
# 512-byte boundary; keep: all kept), and the member starts again. Every
# acknowledged put must then be there with its value and mod revision,
# and the member must take writes again. Then the same with 3 members,
# all SIGKILLed at once (a put acknowledged by a majority must survive
# every member's loss). The seed is printed; CRASH_SEED repeats a run.
# Exits 77 when the programs, crashrevert, etcdctl, python3, curl or Go
# with Debian's clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_kvclient
REVERT=$IT_BUILD/tests/crashrevert
[[ -x $REVERT ]] || it_skip "$REVERT is not built"
it_init crash-unsynced

seed=${CRASH_SEED:-$(($(date +%s%N) % 100000))}
echo "  seed $seed (CRASH_SEED=$seed repeats the kills and reverts)"
RANDOM=$seed

data=$IT_TMP/data
export CETCD_TEST_DISKIO_FAULT=file=both,crashlog
it_cetcd_start c1 "$data" "$IT_TMP/cetcd.log"
if ! it_wait_healthy "$IT_CPORT" 30; then
	fail "the member answers with crash journals on its WAL and db"
	tail -20 "$IT_TMP/cetcd.log"
	exit 1
fi
ep=127.0.0.1:$IT_CPORT

# stopped: the pid is gone or a zombie (its files are closed)
it_exited() {
	local st
	st=$({ cut -d' ' -f3 "/proc/$1/stat"; } 2>/dev/null) || return 0
	[[ $st == Z ]]
}

victims=(member raftd stored member raftd stored member)
modes=(drop random keep random drop random drop)
acks_all=""
total=0
for r in "${!victims[@]}"; do
	victim=${victims[r]} mode=${modes[r]} rseed=$((seed * 100 + r))
	acks=$IT_TMP/acks$r
	it_kv_start "$IT_TMP/writer$r.out" write -endpoint "$ep" -prefix "kv/r$r" -acks "$acks" -writers 3 -per-conn 1
	w=$IT_KV_PID
	check "round $r: writers get acknowledgements" it_wait_lines "$acks" 50 30
	sleep "0.$((RANDOM % 400 + 100))"
	at=$(it_lines "$acks")
	case $victim in
	member)
		check "round $r: SIGKILL of the member at $at acks" it_cetcd_kill
		check "round $r: crashrevert --mode $mode --seed $rseed on the WAL and the db" \
			it_crashrevert "$mode" "$rseed" "$data/member"
		echo "    $IT_REVERTED journaled files reverted"
		it_cetcd_restart "$IT_TMP/cetcd$r.log"
		;;
	*)
		kill -STOP "$IT_CETCD_PID"
		pid=$(it_cetcd_child "$victim") || pid=
		[[ -n $pid ]] && kill -9 "$pid"
		check "round $r: SIGKILL of $victim (${pid:-none running}) at $at acks" \
			eval '[[ -n $pid ]] && it_until 5000 it_exited "$pid"'
		dir=$data/member/wal
		[[ $victim == stored ]] && dir=$data/member/snap
		check "round $r: crashrevert --mode $mode --seed $rseed on its $([[ $victim == raftd ]] && echo WAL || echo db)" \
			it_crashrevert "$mode" "$rseed" "$dir"
		echo "    $IT_REVERTED journaled files reverted"
		kill -CONT "$IT_CETCD_PID"
		;;
	esac
	check "round $r: the member answers again" it_wait_healthy "$IT_CPORT" 30
	check "round $r: and takes writes again" it_wait_lines "$acks" $((at + 50)) 30
	check "round $r: the writers saw no violation" it_kv_stop "$w" "$IT_TMP/writer$r.out"
	n=$(it_lines "$acks")
	total=$((total + n))
	acks_all=${acks_all:+$acks_all,}$acks
	check "round $r: all $total acknowledged puts of rounds 0-$r are there (value, mod revision)" \
		it_acked_at "$ep" kv "$acks_all" "$total"
done

st=0
it_cetcd_stop || st=$?
check "SIGTERM stops the member (exit 0)" test "$st" -eq 0

# ------------------------------------------- 3 members, all killed at once
# kids_gone: every pid of kids has exited (5 s each), 3 a member at least
kids_gone() {
	local p
	for p in "${kids[@]}"; do it_wait_gone "$p" 5000 || return 1; done
	((${#kids[@]} >= 9))
}
# An acknowledged put is durable on a majority: it survives when every
# member loses what it had not synced.
it_cl_init crash-unsynced 3 c
for i in 0 1 2; do it_cl_start "$i" cetcd; done
for i in 0 1 2; do it_cl_answers "$i" || exit 1; done
acks_all=""
total=0
for r in 0 1; do
	mode=$([[ $r == 0 ]] && echo drop || echo random) rseed=$((seed * 100 + 50 + r * 10))
	acks=$IT_TMP/cl-acks$r
	it_kv_start "$IT_TMP/cl-writer$r.out" write -endpoint "$(it_cl_ep $((r + 1)))" -prefix "kv/c$r" -acks "$acks" -writers 3 -per-conn 1
	w=$IT_KV_PID
	check "3 members, round $r: writers get acknowledgements" it_wait_lines "$acks" 50 30
	sleep "0.$((RANDOM % 400 + 100))"
	at=$(it_lines "$acks")
	kids=()
	for i in 0 1 2; do mapfile -t -O "${#kids[@]}" kids < <(pgrep -P "${IT_CL_PIDS[i]}"); done
	kill -9 "${IT_CL_PIDS[@]}"
	for i in 0 1 2; do wait "${IT_CL_PIDS[i]}" 2>/dev/null || true; done
	check "3 members, round $r: SIGKILL of all 3 launchers at $at acks takes their ${#kids[@]} processes" \
		kids_gone
	for i in 0 1 2; do
		check "3 members, round $r: crashrevert --mode $mode --seed $((rseed + i)) on its WAL and db" \
			it_crashrevert "$mode" "$((rseed + i))" "$IT_TMP/${IT_CL_NAMES[i]}/member"
		echo "    $IT_REVERTED journaled files reverted"
	done
	for i in 0 1 2; do it_cl_start "$i" cetcd; done
	for i in 0 1 2; do it_cl_answers "$i" "3 members, round $r: ${IT_CL_NAMES[i]} answers again" || exit 1; done
	check "3 members, round $r: and takes writes again" it_wait_lines "$acks" $((at + 50)) 30
	check "3 members, round $r: the writers saw no violation" it_kv_stop "$w" "$IT_TMP/cl-writer$r.out"
	n=$(it_lines "$acks")
	total=$((total + n))
	acks_all=${acks_all:+$acks_all,}$acks
	for i in 0 1 2; do
		check "3 members, round $r: all $total acknowledged puts are at ${IT_CL_NAMES[i]}" \
			it_acked_at "$(it_cl_ep "$i")" kv "$acks_all" "$total"
	done
done
for i in 0 1 2; do
	IT_CETCD_PID=${IT_CL_PIDS[i]}
	st=0
	it_cetcd_stop || st=$?
	check "SIGTERM stops ${IT_CL_NAMES[i]} (exit 0)" test "$st" -eq 0
done
it_summary
