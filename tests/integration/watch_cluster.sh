#!/usr/bin/env bash
# etcd's Watch on a 3-member cetcd cluster, checked against the history
# the writer made (tests/tools/watchmodel): watchers are spread over the
# three members, the writer starts on one and goes on with the next when
# a request fails. Every watcher must get exactly the history's events in
# its range, once each, in order. Progress is checked too (-progress
# -cetcd-progress, ticks every 300 ms set with etcd's
# --experimental-watch-progress-notify-interval): progress revisions never go back
# on a stream, no event comes at or below a revision a progress response
# named, and an idle watcher on each member hears of the last revision.
# Three runs:
#   1. plain (puts, deletes, txns, compactions);
#   2. the leader SIGKILLed mid-run, then restarted: its watchers
#      reconnect to the next member and resume at the last revision they
#      saw + 1; a put whose answer was lost is looked up before it is
#      recorded or put again;
#   3. leadership moved twice mid-run (etcdctl move-leader).
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init watchcl
it_build_go_tool watchmodel go.etcd.io/etcd/clientv3
WM=$IT_BUILD/tests/watchmodel
# progress notifications every 300 ms, through etcd's flag
PROGRESS=(--experimental-watch-progress-notify-interval 300ms)

# model_start NAME ARGS...: watchmodel in the background (WM_PID), its
# output in $IT_TMP/NAME.out; model_end NAME [CHECK...]: waits for it and
# reports, with CHECK (a command) as a further condition.
model_start() {
	local name=$1
	shift
	"$WM" "$@" >"$IT_TMP/$name.out" 2>&1 &
	WM_PID=$!
}
model_end() {
	local name=$1 rc=0
	shift
	wait "$WM_PID" || rc=$?
	if ((rc == 0)) && { (($# == 0)) || "$@"; }; then
		ok "$name: $(grep -E '^(events|history|reconnects|progress|ticks)' "$IT_TMP/$name.out" | tr '\n' ' ')"
	else
		fail "$name (exit $rc)"
		tail -25 "$IT_TMP/$name.out" | sed 's/^/    /'
	fi
}
reconnected() { it_kv_are "$IT_TMP/$1.out" reconnects -gt 0; }
# rev_past N I...: one of members I... answers with a store revision of N
# at least (the writer's puts, one revision each, got that far).
rev_past() {
	local n=$1 i r
	shift
	for i in "$@"; do
		r=$(it_revision "$(it_cl_ep "$i")") && ((r >= n)) && return 0
	done
	return 1
}
# eps FIRST: the three endpoints, member FIRST first.
eps() {
	local i s=$(it_cl_ep "$1")
	for i in $(it_cl_but "$1"); do s+=,$(it_cl_ep "$i"); done
	echo "$s"
}

it_cl_init watchcl 3
for i in 0 1 2; do it_cl_start "$i" cetcd "${PROGRESS[@]}"; done
for i in 0 1 2; do it_cl_answers "$i" || { it_summary; exit 1; }; done
ok "three cetcd members answer"

# 1. plain
model_start plain -endpoint "$(eps 0)" -prefix c1/ -ops 600 -watchers 30 -seed "${SEED:-1}" \
	-progress -cetcd-progress
model_end plain

# 2. the leader SIGKILLed mid-run
lead=$(it_cl_current_leader)
rev0=$(it_revision "$(it_cl_ep "$lead")")
model_start kill -endpoint "$(eps "$lead")" -prefix c2/ -ops 2500 -watchers 18 -seed 2 -puts-only \
	-early -progress -cetcd-progress
check "the writer is past the first fifth of its puts (every watcher started)" \
	it_until 60000 rev_past $((rev0 + 500)) "$lead"
it_cl_kill "$lead"
ok "SIGKILLed the leader x$lead"
survivors=$(it_cl_but "$lead" | tr '\n' ' ')
# shellcheck disable=SC2086
check "a surviving member leads" it_until 15000 it_cl_leader $survivors
at=$(it_revision "$(it_cl_ep "$(it_cl_other "$lead")")")
# shellcheck disable=SC2086
check "the writer goes on through the survivors before x$lead comes back" \
	it_until 30000 rev_past $((at + 100)) $survivors
it_cl_start "$lead" cetcd "${PROGRESS[@]}"
check "x$lead comes back" it_wait_healthy "${IT_CL_CPORT[lead]}" 60
model_end "kill" reconnected kill

# 3. leadership moved twice mid-run
lead=$(it_cl_current_leader)
rev0=$(it_revision "$(it_cl_ep "$lead")")
model_start move -endpoint "$(eps "$lead")" -prefix c3/ -ops 2500 -watchers 18 -seed 3 -puts-only \
	-early -progress -cetcd-progress
for hop in 1 2; do
	check "move $hop: the writer is $((hop * 600)) puts into its run" \
		it_until 60000 rev_past $((rev0 + hop * 600)) 0 1 2
	lead=$(it_cl_current_leader)
	mapfile -t others < <(it_cl_but "$lead")
	target=${others[hop - 1]}
	etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "$(it_cl_ep "$lead")" \
		move-leader "$(it_member_id "$(it_cl_ep "$target")")" >/dev/null 2>&1 || true
	check "leadership moved from x$lead to x$target" it_until 10000 it_leads "$(it_cl_ep "$target")"
done
model_end move

it_cl_stop 0 1 2
it_summary
