#!/usr/bin/env bash
# Leases through faults in a cluster of three cetcd members:
#   (a) SIGKILL of the leader member: a 10 s lease left alone is not
#       revoked before its original expiry, its remaining TTL at the new
#       leader is at most about one TTL (a new leader extends every
#       lease), and it is gone by its original expiry + TTL + a margin;
#   (c) every process of the leader member stopped (SIGSTOP) past the
#       election timeout while a 2 s lease comes due on its clock, then
#       resumed: a 10 s lease kept alive through a follower (its renewals
#       going to the new leader) keeps its key on every member the whole
#       time, past its TTL since the pause began;
#   (e) the same with a 3 s lease, shorter than the request timeout: its
#       renewals in flight to the stopped leader are given up and asked
#       of the new leader as soon as the follower knows it (the follower
#       logs so; a timetolive asked as the leader stopped is answered
#       within etcdctl's 5 s), so the lease neither expires on the client's clock
#       (etcdctl would report it "expired or revoked") nor loses its key;
#   (d) a lock held by `etcdctl lock` through a follower (a 3 s session,
#       its keepalives forwarded) survives SIGKILL of the leader member,
#       then SIGKILL of the new leader's stored: its key, read through the
#       other follower all along, never disappears, and a second
#       `etcdctl lock` on the name waits until the holder is killed;
#   (f) the leader's raftd alone stopped (SIGSTOP) while its stored and
#       gatewayd run on: once another member leads, no keep-alive through
#       the stopped leader's endpoint renews (invariant 8: its lessor
#       renews only in a term raftd confirmed after the keep-alive came),
#       the lease expires at the new leader, and once resumed the member
#       forwards renewals to the new leader;
#   (b) all three members stopped and started again: a lease and its key
#       are still there with a checkpointed remaining TTL (not reset to
#       the whole TTL), and then expire.
# Exits 77 when the programs or Debian's etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init lease_faults

ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s --command-timeout 5s "$@"; }
grant() { ctl --endpoints "$1" lease grant "$2" | awk '{ print $2 }'; }
# has EP KEY: a serializable read of KEY at EP finds it (by its key: a
# lock key has an empty value).
has() { [[ -n $(ctl --endpoints "$1" get "$2" --consistency=s --keys-only 2>/dev/null) ]]; }
# gone EP KEY: a serializable read of KEY at EP answers, without it.
gone() {
	local v
	v=$(ctl --endpoints "$1" get "$2" --consistency=s --keys-only 2>/dev/null) && [[ -z $v ]]
}
gone_everywhere() {
	local i
	for i in 0 1 2; do
		[[ ${down:-} == "$i" ]] && continue
		gone "$(it_cl_ep "$i")" "$1" || return 1
	done
}
# remaining EP ID: the remaining TTL of lease ID (hex) at EP, in seconds
# (empty when not answered).
remaining() {
	local r
	r=$(ctl --endpoints "$1" lease timetolive "$2" 2>/dev/null | sed -nE 's/.*remaining\((-?[0-9]+)s\).*/\1/p')
	[[ -n $r ]] && echo "$r"
}
# watcher EP KEY FILE: every 100 ms, one line to FILE: "there", "GONE"
# (read, and absent) or "err" (no answer); runs until killed.
watcher() {
	local v
	while true; do
		if v=$(ctl --endpoints "$1" get "$2" --consistency=s --keys-only 2>/dev/null); then
			[[ -n $v ]] && echo there || echo GONE
		else
			echo err
		fi
		sleep 0.1
	done >>"$3"
}
start_watcher() {
	watcher "$@" &
	WPID=$!
	it_track "$WPID"
}
# renews_once EP ID: one keep-alive of lease ID (hex) through EP, given
# 2 s, is answered with a positive TTL.
renews_once() {
	grep -qE "keepalived with TTL\([1-9]" <<<"$(ETCDCTL_API=3 etcdctl --dial-timeout 2s \
		--command-timeout 2s --endpoints "$1" lease keep-alive --once "$2" 2>&1 || true)"
}
# quiet CMD...: CMD's status, its output dropped.
quiet() { "$@" >/dev/null; }
stop_pid() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
start_all() {
	local i
	for i in 0 1 2; do it_cl_start "$i" cetcd --lease-checkpoint-interval 1s; done
	for i in 0 1 2; do it_cl_answers "$i" || { it_summary; exit 1; }; done
}
# restart I: member I (killed) started again, answering.
restart() {
	wait "${IT_CL_PIDS[$1]}" 2>/dev/null || true
	it_cl_start "$1" cetcd --lease-checkpoint-interval 1s
	it_cl_answers "$1" || { it_summary; exit 1; }
}
# new_leader OLD: waits for a leader other than OLD among the others.
new_leader() {
	local i t
	for t in $(seq 1 100); do
		for i in $(it_cl_but "$1"); do
			it_leads "$(it_cl_ep "$i")" && { echo "$i"; return 0; }
		done
		sleep 0.1
	done
	return 1
}

it_cl_init lease_faults 3
start_all

# ---- (a) SIGKILL of the leader member: a 10 s lease left alone
lead=$(it_cl_current_leader)
id=$(grant "$(it_cl_ep "$lead")" 10)
t0=$(it_now_ms)
ctl --endpoints "$(it_cl_ep "$lead")" put k/a v --lease "$id" >/dev/null
f=$(it_cl_other "$lead")
start_watcher "$(it_cl_ep "$f")" k/a "$IT_TMP/a.watch"
check "(a) the watcher reads the key through x$f" it_wait_log "$IT_TMP/a.watch" '^there$' 10 3
it_cl_kill "$lead"
down=$lead
nl=$(new_leader "$lead") || { fail "(a) a new leader after SIGKILL of x$lead"; it_summary; exit 1; }
echo "# (a) x$lead killed $(($(it_now_ms) - t0)) ms after the grant; x$nl leads"
rem=$(it_until 5000 remaining "$(it_cl_ep "$nl")" "$id" >/dev/null; remaining "$(it_cl_ep "$nl")" "$id") || true
echo "# (a) remaining TTL at the new leader: ${rem:-none} s"
check "(a) the new leader knows the lease, with at most TTL + 2 s left" \
	test -n "$rem" -a "${rem:-99}" -ge 1 -a "${rem:-99}" -le 12
# present until the original expiry (10 s after the grant, less 0.5 s for
# the read's own time)
while (($(it_now_ms) - t0 < 9500)); do sleep 0.1; done
stop_pid "$WPID"
check "(a) the key never disappeared before the lease's original expiry" \
	test "$(it_count "$IT_TMP/a.watch" '^GONE$')" -eq 0 -a "$(it_count "$IT_TMP/a.watch" '^there$')" -ge 5
check "(a) the key is gone by the original expiry + TTL + 5 s" \
	it_until $((25000 - ($(it_now_ms) - t0))) gone_everywhere k/a
echo "# (a) gone $(($(it_now_ms) - t0)) ms after the grant"
restart "$lead"
down=

# ---- (c) the leader stopped past the election timeout
lead=$(it_cl_current_leader)
read -r f g <<<"$(it_cl_but "$lead" | tr "\n" " ")"
kid=$(grant "$(it_cl_ep "$lead")" 10)
did=$(grant "$(it_cl_ep "$lead")" 2)
ctl --endpoints "$(it_cl_ep "$lead")" put k/c/kept v --lease "$kid" >/dev/null
ctl --endpoints "$(it_cl_ep "$lead")" put k/c/due v --lease "$did" >/dev/null
ETCDCTL_API=3 etcdctl --endpoints "$(it_cl_ep "$f")" lease keep-alive "$kid" >"$IT_TMP/c.ka" 2>&1 &
ka=$!
it_track "$ka"
start_watcher "$(it_cl_ep "$g")" k/c/kept "$IT_TMP/c.watch"
w1=$WPID
start_watcher "$(it_cl_ep "$f")" k/c/kept "$IT_TMP/c.watch2"
w2=$WPID
procs=$(it_cl_procs "$lead")
# shellcheck disable=SC2086
kill -STOP $procs
sleep 6
check "(c) another member leads while x$lead is stopped" quiet new_leader "$lead"
# shellcheck disable=SC2086
kill -CONT $procs
renewed=$(it_count "$IT_TMP/c.ka" "keepalived with TTL\\(10\\)")
echo "# (c) x$lead stopped 6 s, its 2 s lease due on its clock, resumed"
check "(c) the lease that came due goes" it_until 15000 gone_everywhere k/c/due
# past the kept lease's TTL since the pause began: without renewals
# through the new leader it would be gone by now
sleep 10
check "(c) the resumed member reads the kept key again" it_until 5000 has "$(it_cl_ep "$lead")" k/c/kept
stop_pid "$w1"
stop_pid "$w2"
check "(c) the kept key never disappeared (read through x$g)" \
	test "$(it_count "$IT_TMP/c.watch" '^GONE$')" -eq 0 -a "$(it_count "$IT_TMP/c.watch" '^there$')" -ge 10
check "(c) nor through x$f, which forwards its keep-alives" \
	test "$(it_count "$IT_TMP/c.watch2" '^GONE$')" -eq 0 -a "$(it_count "$IT_TMP/c.watch2" '^there$')" -ge 10
echo "# (c) renewals through x$f: $renewed by the resume, $(it_count "$IT_TMP/c.ka" "keepalived with TTL\\(10\\)") in all"
check "(c) renewals through x$f went on after the resume" \
	it_log_has "$IT_TMP/c.ka" "keepalived with TTL\\(10\\)" $((renewed + 2))
stop_pid "$ka"
check "(c) once renewals stop the kept lease expires too" it_until 15000 gone_everywhere k/c/kept

# ---- (e) a lease shorter than the request timeout, through a follower
lead=$(it_cl_current_leader)
read -r f g <<<"$(it_cl_but "$lead" | tr "\n" " ")"
sid=$(grant "$(it_cl_ep "$lead")" 3)
ctl --endpoints "$(it_cl_ep "$lead")" put k/e/short v --lease "$sid" >/dev/null
ETCDCTL_API=3 etcdctl --endpoints "$(it_cl_ep "$f")" lease keep-alive "$sid" >"$IT_TMP/e.ka" 2>&1 &
ka=$!
it_track "$ka"
check "(e) the 3 s lease is renewed through x$f" it_until 10000 it_log_has "$IT_TMP/e.ka" "keepalived with TTL\\(3\\)" 2
start_watcher "$(it_cl_ep "$g")" k/e/short "$IT_TMP/e.watch"
w1=$WPID
moved=$(it_count "$(it_cl_log "$f")" "asked of the new one")
renewed=$(it_count "$IT_TMP/e.ka" "keepalived with TTL\\(3\\)")
procs=$(it_cl_procs "$lead")
# shellcheck disable=SC2086
kill -STOP $procs
# asked at once, so in flight to the stopped leader until x$f knows another
ctl --endpoints "$(it_cl_ep "$f")" lease timetolive "$sid" >"$IT_TMP/e.ttl" 2>&1 &
ttl=$!
it_track "$ttl"
check "(e) another member leads while x$lead is stopped" quiet new_leader "$lead"
# more than the request timeout (5 s) and twice the TTL
sleep 7
during=$(it_count "$IT_TMP/e.ka" "keepalived with TTL\\(3\\)")
# shellcheck disable=SC2086
kill -CONT $procs
stop_pid "$w1"
echo "# (e) renewals through x$f: $renewed before x$lead stopped, $during by its resume"
check "(e) x$f asked the new leader what was in flight to x$lead" \
	it_until 5000 it_log_has "$(it_cl_log "$f")" "asked of the new one" $((moved + 1))
wait "$ttl" 2>/dev/null || true
check "(e) a timetolive through x$f asked as x$lead stopped is answered within 5 s" \
	it_log_has "$IT_TMP/e.ttl" "remaining\\([0-9]+s\\)" 1
check "(e) renewals through x$f went on while x$lead was stopped" test "$during" -ge $((renewed + 3))
check "(e) etcdctl never saw the lease expire" test "$(it_count "$IT_TMP/e.ka" "expired or revoked")" -eq 0
check "(e) its key never disappeared (read through x$g)" \
	test "$(it_count "$IT_TMP/e.watch" '^GONE$')" -eq 0 -a "$(it_count "$IT_TMP/e.watch" '^there$')" -ge 5
stop_pid "$ka"

# ---- (d) a lock held through a follower across faults
lead=$(it_cl_current_leader)
read -r f g <<<"$(it_cl_but "$lead" | tr "\n" " ")"
ETCDCTL_API=3 etcdctl --endpoints "$(it_cl_ep "$f")" lock --ttl=3 faultlock >"$IT_TMP/d.holder" 2>&1 &
holder=$!
it_track "$holder"
check "(d) the holder gets the lock" it_until 10000 it_has_lines "$IT_TMP/d.holder" 1
lkey=$(head -n 1 "$IT_TMP/d.holder")
echo "# (d) lock key $lkey held through x$f; read through x$g"
check "(d) the lock key is there" has "$(it_cl_ep "$g")" "$lkey"
start_watcher "$(it_cl_ep "$g")" "$lkey" "$IT_TMP/d.watch"
ETCDCTL_API=3 etcdctl --endpoints "$(it_cl_ep "$g")" lock --ttl=3 faultlock echo second-got-it \
	>"$IT_TMP/d.second" 2>&1 &
second=$!
it_track "$second"
check "(d) the watcher reads the lock key through x$g" it_wait_log "$IT_TMP/d.watch" '^there$' 10 3
it_cl_kill "$lead"
down=$lead
nl=$(new_leader "$lead") || { fail "(d) a new leader after SIGKILL of x$lead"; it_summary; exit 1; }
echo "# (d) x$lead killed; x$nl leads"
sleep 8
restart "$lead"
down=
lead=$(it_cl_current_leader)
IT_CETCD_PID=${IT_CL_PIDS[$lead]}
spid=$(it_cetcd_child stored) || fail "(d) x$lead runs a stored"
kill -9 "$spid" 2>/dev/null || true
echo "# (d) stored of x$lead (pid $spid) killed"
check "(d) the launcher starts x$lead's stored again" quiet it_wait_child stored "$spid" 30
sleep 8
check "(d) the holder still runs" test -n "$(ps -o pid= -p "$holder")"
check "(d) the second locker still waits" test -n "$(ps -o pid= -p "$second")" -a ! -s "$IT_TMP/d.second"
stop_pid "$WPID"
check "(d) the lock key never disappeared while its holder lived" \
	test "$(it_count "$IT_TMP/d.watch" '^GONE$')" -eq 0 -a "$(it_count "$IT_TMP/d.watch" '^there$')" -ge 10
echo "# (d) reads of the lock key: $(it_count "$IT_TMP/d.watch" '^there$') there, $(it_count "$IT_TMP/d.watch" '^err$') unanswered"
kill -9 "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
check "(d) once the holder is gone the second locker gets the lock" \
	it_until 20000 it_log_has "$IT_TMP/d.second" second-got-it 1
wait "$second" 2>/dev/null || true

# ---- (f) the leader's raftd alone stopped: its lessor renews nothing
lead=$(it_cl_current_leader)
fid=$(grant "$(it_cl_ep "$lead")" 4)
ctl --endpoints "$(it_cl_ep "$lead")" put k/f/x v --lease "$fid" >/dev/null
check "(f) a keep-alive through the leader x$lead renews" renews_once "$(it_cl_ep "$lead")" "$fid"
IT_CETCD_PID=${IT_CL_PIDS[$lead]}
rpid=$(it_cetcd_child raftd) || fail "(f) x$lead runs a raftd"
kill -STOP "$rpid"
t0=$(it_now_ms)
if nl=$(new_leader "$lead"); then
	echo "# (f) x$lead's raftd (pid $rpid) stopped; x$nl leads $(($(it_now_ms) - t0)) ms later"
	# asked again and again for twice the TTL: before the fix its stored,
	# still primary on the status raftd left, renewed each one
	n=0 ok=0
	while (($(it_now_ms) - t0 < 8000)); do
		n=$((n + 1))
		renews_once "$(it_cl_ep "$lead")" "$fid" && ok=$((ok + 1))
	done
	echo "# (f) keep-alives through x$lead while its raftd was stopped: $n, renewed $ok"
	check "(f) no keep-alive through x$lead renews while its raftd is stopped" test "$ok" -eq 0
	check "(f) the lease expires at x$nl and its key goes there" \
		it_until 15000 gone "$(it_cl_ep "$nl")" k/f/x
else
	fail "(f) a new leader while x$lead's raftd is stopped"
fi
kill -CONT "$rpid"
fid=$(grant "$(it_cl_ep "$(it_cl_current_leader)")" 10)
check "(f) x$lead, resumed, renews again (forwarding to the leader)" \
	it_until 15000 renews_once "$(it_cl_ep "$lead")" "$fid"

# ---- (b) every member stopped and started again
lead=$(it_cl_current_leader)
id=$(grant "$(it_cl_ep "$lead")" 20)
t0=$(it_now_ms)
ctl --endpoints "$(it_cl_ep "$lead")" put k/b v --lease "$id" >/dev/null
sleep 8
it_cl_stop 0 1 2
echo "# (b) all stopped $(($(it_now_ms) - t0)) ms after the grant"
start_all
for i in 0 1 2; do
	check "(b) x$i has the key after the restart" it_until 5000 has "$(it_cl_ep "$i")" k/b
done
lead=$(it_cl_current_leader)
rem=$(it_until 5000 remaining "$(it_cl_ep "$lead")" "$id" >/dev/null; remaining "$(it_cl_ep "$lead")" "$id") || true
echo "# (b) remaining TTL after the restart: ${rem:-none} s ($(($(it_now_ms) - t0)) ms after the grant)"
check "(b) the remaining TTL was checkpointed (1..15 s of 20)" \
	test -n "$rem" -a "${rem:-99}" -ge 1 -a "${rem:-99}" -le 15
check "(b) then the lease expires and its key goes everywhere" \
	it_until $(((${rem:-20} + 8) * 1000)) gone_everywhere k/b
it_cl_stop 0 1 2
it_summary
