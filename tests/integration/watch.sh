#!/usr/bin/env bash
# etcd's Watch on a real member, checked against a model of the history
# (tests/tools/watchmodel): random puts, deletes, txns and compactions
# while watchers with random ranges, filters, prev_kv and start revisions
# (current and past) run; each must get exactly the history's events in
# its range, in order, each revision in one response. Four runs:
#   1. plain;
#   2. slow readers: half of the watchers stop reading for 3 s while
#      large values go by, so their streams back up: the gateway holds
#      their events, then merges them per watcher, and past
#      WATCH_QUEUE_HIGH they catch up from the db; progress requests on
#      every stream check that a held event never comes after a progress
#      response naming its revision; then a client that never gives
#      HTTP/2 window back (tests/tools/lazywatch) still gets the event
#      held for it;
#   3. a small broadcast ring (--max-request-bytes 1024: the ring holds 4
#      of its largest records) read only every 50 ms by the gateways
#      (CETCD_WATCH_READ_EVERY_MS), so they are lapped and catch up from
#      the db (the log says so);
#   4. stored and a gatewayd SIGKILLed while puts go on; watchers
#      reconnect and resume at the last revision they saw + 1.
# Runs 1, 2 and 4 use the ring wake-up where the kernel has it (raftd's
# and the gateways' loops wait on their doorbell through io_uring's
# futex wait, shm/waker.h), run 3 the waker threads (CETCD_WAKER=thread);
# the processes' logs must say so.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init watch
it_build_go_tool watchmodel go.etcd.io/etcd/clientv3
WM=$IT_BUILD/tests/watchmodel
it_build_go_tool lazywatch go.etcd.io/etcd/clientv3

# The mode this kernel gives: ring where io_uring runs futex waits (Linux
# 6.7 and later) and is not switched off.
expected_wake() {
	local v maj min off=0
	v=$(uname -r)
	maj=${v%%.*}
	min=${v#*.}
	min=${min%%[^0-9]*}
	[[ -r /proc/sys/kernel/io_uring_disabled ]] && off=$(cat /proc/sys/kernel/io_uring_disabled)
	if ((maj > 6 || (maj == 6 && min >= 7))) && ((off == 0 || (off == 1 && EUID == 0))); then
		echo ring
	else
		echo thread
	fi
}

# LOG MODE: raftd and every gateway that started logged wake-up mode MODE
wake_mode_is() {
	local n all
	n=$(grep -cE '"(event loop set up|ready to serve client requests)"' "$1")
	all=$(grep -oE '"ring-wake":"[a-z]+"' "$1" | sort | uniq -c | sed 's/^ *//')
	echo "    wake-up modes logged: ${all:-none} (of $n start lines)"
	((n >= 2)) && [[ $all == "$n \"ring-wake\":\"$2\"" ]]
}

run_model() { # NAME ARGS...: runs watchmodel, output in $IT_TMP/NAME.out
	local name=$1
	shift
	if "$WM" -endpoint "127.0.0.1:$IT_CPORT" "$@" >"$IT_TMP/$name.out" 2>&1; then
		ok "$name: $(grep -E '^(events|history|reconnects)' "$IT_TMP/$name.out" | tr '\n' ' ')"
	else
		fail "$name"
		tail -25 "$IT_TMP/$name.out" | sed 's/^/    /'
	fi
}

it_cetcd_start w1 "$IT_TMP/m1.data" "$IT_TMP/m1.log" --gateways 2 \
	--experimental-watch-progress-notify-interval 300ms
check "member answers" it_wait_healthy "$IT_CPORT" 30
mode=$(expected_wake)
check "raftd and the gateways wake by $mode (kernel $(uname -r))" wake_mode_is "$IT_TMP/m1.log" "$mode"
run_model plain -prefix p1/ -ops 800 -watchers 30 -seed "${SEED:-1}"
run_model slow -prefix p2/ -ops 300 -watchers 12 -seed 2 -slow -progress -cetcd-progress -value-size 20000
check "the slow watchers' streams held their events while backlogged" \
	grep -q "its events are held and merged" "$IT_TMP/m1.log"
# A client that never gives window back: after five 10 kB events it owes
# 50 kB, more than half its 64 kB window (the step assumed before a
# client's first WINDOW_UPDATE) and 16 kB, so the sixth is held; it must
# still come (WATCH_HOLD_MAX_NS), while a seventh no longer fits the window.
if "$IT_BUILD/tests/lazywatch" -endpoint "127.0.0.1:$IT_CPORT" -puts 6 -value-size 10000 -wait 10s \
	>"$IT_TMP/lazy.out" 2>&1 && [[ $(it_kv_val "$IT_TMP/lazy.out" got) == 6 ]]; then
	ok "a client that gives no window back got all 6 events ($(grep "^event 6" "$IT_TMP/lazy.out"))"
else
	fail "a client that gives no window back"
	sed 's/^/    /' "$IT_TMP/lazy.out"
fi

# 4. kills, on the same member. With -early every watcher starts within
# the first tenth of the 12000 puts (one revision each): each kill waits
# until the writer is 1500 puts further than before it, so every watcher
# has started and the member wrote again since the last kill.
# rev_past N: the member answers with a store revision of N at least.
rev_past() {
	local r
	r=$(it_revision "127.0.0.1:$IT_CPORT") && ((r >= $1))
}
rev0=$(it_revision "127.0.0.1:$IT_CPORT")
"$WM" -endpoint "127.0.0.1:$IT_CPORT" -prefix p4/ -ops 12000 -watchers 16 -seed 4 -puts-only -early \
	>"$IT_TMP/kill.out" 2>&1 &
wm_pid=$!
for what in stored gatewayd-0; do
	rev0=$((rev0 + 1500))
	if ! it_until 60000 rev_past "$rev0"; then
		fail "the writer reaches revision $rev0 before the SIGKILL of $what"
		continue
	fi
	pid=$(it_cetcd_child "$what" || true)
	if [[ -n $pid ]]; then
		kill -9 "$pid"
		ok "SIGKILLed $what ($pid) at revision $rev0 or past it"
	else
		fail "no $what to kill"
	fi
done
if wait "$wm_pid" && it_kv_are "$IT_TMP/kill.out" reconnects -gt 0; then
	ok "kills (streams broke and resumed): $(grep -E '^(events|history|reconnects)' "$IT_TMP/kill.out" | tr '\n' ' ')"
else
	fail "kills"
	tail -25 "$IT_TMP/kill.out" | sed 's/^/    /'
fi
it_cetcd_stop || true

# 3. a ring that holds a few records
unset IT_CPORT IT_PPORT
CETCD_WATCH_READ_EVERY_MS=50 CETCD_WAKER=thread \
	it_cetcd_start w3 "$IT_TMP/m3.data" "$IT_TMP/m3.log" --max-request-bytes 1024
check "small-ring member answers" it_wait_healthy "$IT_CPORT" 30
check "CETCD_WAKER=thread: raftd and the gateways wake by thread" wake_mode_is "$IT_TMP/m3.log" thread
# a lap needs the writer to outrun a gateway's 50 ms reads: on a loaded
# machine it may not, so up to three runs (each one checked) until one
# was lapped
for try in 1 2 3; do
	run_model "lapped.$try" -prefix "p3/$try/" -ops 1500 -watchers 20 -seed $((3 + try)) \
		-value-size 420 -no-compact
	grep -q "watch events were lost on the ring" "$IT_TMP/m3.log" && break
done
check "the gateways were lapped and caught up" grep -q "watch events were lost on the ring" "$IT_TMP/m3.log"
it_cetcd_stop || true
it_summary
