#!/usr/bin/env bash
# A follower forwards at most LEASE_FWD_MAX_FLIGHT (16) lease calls to
# the leader at once, each on a keep-alive connection of its raftd's
# forwarding thread; the others wait their turn. Three cetcd members; the
# leader's gateways (which answer its peer port's /leases) are stopped
# (SIGSTOP), 40 keep-alives are sent through a follower at once: its
# raftd opens at most 16 connections to the leader's peer port beside
# those it had (its Raft streams, a forwarding connection already up),
# and at least 8 (the calls do wait there), and runs at most one more thread
# than before (no thread per call), and once the gateways resume every
# keep-alive is answered with the lease's TTL.
# Before that, a forwarded timetolive's header carries the follower's
# store revision.
# Exits 77 when the programs or Debian's etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init lease_fwd_cap

ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s --command-timeout 5s "$@"; }
threads() { awk '/^Threads:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
# conns PID PORT: PID's established TCP connections to 127.0.0.1:PORT.
conns() { ss -Htnp state established dst "127.0.0.1:$2" 2>/dev/null | grep -c "pid=$1," || true; }
# gateways I: the pids of member I's gatewayd processes.
gateways() {
	local p
	for p in $(pgrep -P "${IT_CL_PIDS[$1]}"); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q '/gatewayd ' && echo "$p"
	done
	return 0
}
N=40

it_cl_init lease_fwd_cap 3
for i in 0 1 2; do it_cl_start "$i" cetcd; done
for i in 0 1 2; do it_cl_answers "$i" || { it_summary; exit 1; }; done
lead=$(it_cl_current_leader)
f=$(it_cl_other "$lead")
id=$(ctl --endpoints "$(it_cl_ep "$lead")" lease grant 60 | awk '{ print $2 }')
renews() { ctl --endpoints "$(it_cl_ep "$f")" lease keep-alive --once "$id" 2>&1 | grep -q "keepalived with TTL"; }
check "keep-alive through x$f renews" it_until 10000 renews
for k in 1 2 3; do ctl --endpoints "$(it_cl_ep "$lead")" put "k/$k" v >/dev/null; done
# a forwarded answer carries the follower's header: its store revision
ttlrev() {
	ctl --endpoints "$(it_cl_ep "$f")" lease timetolive "$id" -w json |
		python3 -c 'import json,sys; d = json.load(sys.stdin); print(d.get("header", d)["revision"])'
}
same_rev() { [[ $(ttlrev) == "$(it_revision "$(it_cl_ep "$f")")" ]]; }
check "a forwarded timetolive carries x$f's revision (4, not 0)" it_until 5000 same_rev
echo "# timetolive through x$f: header revision $(ttlrev), the member's $(it_revision "$(it_cl_ep "$f")")"
IT_CETCD_PID=${IT_CL_PIDS[$f]}
raftd=$(it_cetcd_child raftd)
base=$(threads "$raftd")
before=$(conns "$raftd" "${IT_CL_APORT[$lead]}")
gws=$(gateways "$lead")
check "x$lead runs gateways" test -n "$gws"
# shellcheck disable=SC2086
kill -STOP $gws
pids=()
for ((k = 0; k < N; k++)); do
	ETCDCTL_API=3 etcdctl --endpoints "$(it_cl_ep "$f")" --command-timeout 30s \
		lease keep-alive --once "$id" >"$IT_TMP/ka.$k" 2>&1 &
	pids+=($!)
	it_track "$!"
done
most=0
most_threads=0
t0=$(it_now_ms)
while (($(it_now_ms) - t0 < 3000)); do
	n=$(conns "$raftd" "${IT_CL_APORT[$lead]}")
	((n > most)) && most=$n
	n=$(threads "$raftd")
	((n > most_threads)) && most_threads=$n
	sleep 0.05
done
echo "# raftd of x$f: $before connections to x$lead's peer port before, at most $most with $N keep-alives waiting; $base threads before, at most $most_threads"
# shellcheck disable=SC2086
kill -CONT $gws
check "the forwards in flight stay within 16 connections" test $((most - before)) -le 16
check "and the calls do wait there (at least 8 in flight)" test $((most - before)) -ge 8
check "no thread per call (at most one more thread)" test "$base" -gt 0 -a $((most_threads - base)) -le 1
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
ok=0
for ((k = 0; k < N; k++)); do it_log_has "$IT_TMP/ka.$k" "keepalived with TTL\\(" 1 && ok=$((ok + 1)); done
echo "# $ok of $N keep-alives answered with the lease's TTL"
check "every keep-alive is answered once the gateways resume" test "$ok" -eq "$N"
it_cl_stop 0 1 2
it_summary
