#!/usr/bin/env bash
# Streams that require a leader (etcd's clientv3.WithRequireLeader: the
# gRPC metadata hasleader=true), as etcd 3.4's interceptors treat them, on
# a 3-member cluster with a 500 ms election timeout. Two watchers on one
# member through etcd's Go client (tests/tools/leaderwatch), one with
# WithRequireLeader and one without; then the other two members are
# SIGSTOPped, so the member loses its leader:
#   - the require-leader watch ends with UNAVAILABLE "etcdserver: no
#     leader", not before two election timeouts after the stop (three
#     looks in a row without a leader) and within six (up to two to notice
#     the loss, three looks, one look's alignment) plus a second of slack;
#   - the plain watch stays open;
#   - a new require-leader watch on that member is refused at once;
# then the two resume (SIGCONT): a new require-leader watch is created and
# stays open, and the plain watch gets the event of a put.
# Run on three cetcd members, then on three of Debian's etcd 3.4 when it is
# installed. Exits 77 when the programs, etcdctl or Go with Debian's
# clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init noleader
it_build_go_tool leaderwatch go.etcd.io/etcd/clientv3
LW=$IT_BUILD/tests/leaderwatch
ET=500 # election timeout, ms

# lw NAME ARGS...: leaderwatch in the background (LW_PID), its output in
# $IT_TMP/NAME.out.
lw() {
	local name=$1
	shift
	it_bg "$IT_TMP/$name.out" "$LW" "$@"
	LW_PID=$IT_BG_PID
}
has() { grep -q -- "$2" "$IT_TMP/$1.out" 2>/dev/null; }
show() { sed 's/^/    /' "$IT_TMP/$1.out"; }
# knows_leader EP: the member at EP names a leader in its status.
knows_leader() { [[ $(it_status "$1" 'd["leader"]' 2>/dev/null) =~ ^[1-9] ]]; }
# procs I SIGNAL: SIGNAL to every process of member I.
signal() {
	local p
	for p in $(it_cl_procs "$1"); do kill "-$2" "$p" 2>/dev/null || true; done
}

run() {
	local label=$1 kind=$2 i w=0 t0 took rl plain
	echo "# $label: three $kind members"
	it_cl_init "$label" 3 "$label"
	for i in 0 1 2; do
		it_cl_start "$i" "$kind" --election-timeout "$ET" --heartbeat-interval 50
	done
	for i in 0 1 2; do it_cl_answers "$i" || exit 1; done
	it_cl_current_leader >/dev/null
	local ep=$(it_cl_ep "$w")

	lw "$label.rl" -endpoint "$ep" -require-leader -for 40s
	rl=$LW_PID
	lw "$label.plain" -endpoint "$ep" -for 40s
	plain=$LW_PID
	check "$label: both watches are created" it_until 10000 eval 'has "$label.rl" created && has "$label.plain" created'

	t0=$(it_now_ms)
	for i in 1 2; do signal "$i" STOP; done
	if it_until $((6 * ET + 3000)) has "$label.rl" '^end'; then
		took=$(($(it_now_ms) - t0))
		echo "  the require-leader watch ended $took ms after the stop"
		check "$label: it ended with UNAVAILABLE \"etcdserver: no leader\"" \
			has "$label.rl" '^end code=Unavailable desc=etcdserver: no leader '
		check "$label: not before two election timeouts ($took ms >= $((2 * ET)))" \
			test "$took" -ge $((2 * ET))
		check "$label: within six election timeouts and a second ($took ms)" \
			test "$took" -le $((6 * ET + 1000))
	else
		fail "$label: the require-leader watch ends once the member has no leader"
		show "$label.rl"
	fi
	sleep 0.5
	check "$label: the plain watch stays open" eval '! has "$label.plain" "^end" && kill -0 "$plain"'

	lw "$label.new" -endpoint "$ep" -require-leader -for 10s
	wait "$LW_PID" || true
	if has "$label.new" '^end code=Unavailable desc=etcdserver: no leader after=0\.' &&
		! has "$label.new" created; then
		ok "$label: a new require-leader watch is refused at once: $(cat "$IT_TMP/$label.new.out")"
	else
		fail "$label: a new require-leader watch is refused at once"
		show "$label.new"
	fi

	for i in 1 2; do signal "$i" CONT; done
	it_cl_current_leader "$label: a member leads again" >/dev/null
	# the watch's member must know the leader first; and the return may
	# bring one more election (the lone member's higher term, without
	# pre-vote), which ends a watch made meanwhile: up to three tries
	local tries=0
	while ((tries < 3)); do
		tries=$((tries + 1))
		it_until 10000 knows_leader "$ep" || true
		lw "$label.back" -endpoint "$ep" -require-leader -for "$((4 * ET))ms"
		wait "$LW_PID" || true
		! { has "$label.back" created && has "$label.back" "^open"; } || break
		echo "  try $tries: $(tr '\n' ' ' <"$IT_TMP/$label.back.out")"
	done
	check "$label: after the others return, a require-leader watch is created and stays open ($tries tries)" \
		eval 'has "$label.back" created && has "$label.back" "^open"'
	[[ $(it_cl_ctl 0 put noleader v) == OK ]] || fail "$label: a put after the return"
	check "$label: the plain watch gets the put's event" it_until 10000 has "$label.plain" '^event noleader'
	kill "$plain" "$rl" 2>/dev/null || true
	it_cl_stop 0 1 2
}

run c cetcd
if command -v etcd >/dev/null; then
	run e etcd
else
	echo "# e: skipped, Debian's etcd is not installed"
fi
it_summary
