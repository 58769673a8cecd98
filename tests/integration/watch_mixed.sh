#!/usr/bin/env bash
# etcd's Watch on mixed clusters of Debian's etcd 3.4 and cetcd members:
# (a) an etcd leader with two cetcd followers, (b) a cetcd leader with
# two etcd followers. Watchers spread over the three members
# (tests/tools/watchmodel) must all see exactly the history's events:
# same revisions, keys, values and prev_kv, whichever kind of member
# serves them. Progress responses are checked as etcd 3.4 gives them
# (-progress: never backwards on a stream, no event at or below a
# watcher's own progress notification, idle watchers hear of the last
# revision). Then a run with leadership moved to the other kind mid-run.
# Exits 77 when Debian's etcd, etcdctl, python3 or Go with Debian's
# clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_init watchmix
it_build_go_tool watchmodel go.etcd.io/etcd/clientv3
WM=$IT_BUILD/tests/watchmodel
export CETCD_WATCH_PROGRESS_MS=300

run_model() { # NAME ARGS...
	local name=$1
	shift
	if "$WM" "$@" >"$IT_TMP/$name.out" 2>&1; then
		ok "$name: $(grep -E '^(events|history|reconnects|progress|ticks)' "$IT_TMP/$name.out" | tr '\n' ' ')"
	else
		fail "$name"
		tail -25 "$IT_TMP/$name.out" | sed 's/^/    /'
	fi
}
move_to() { # TARGET: leadership to member TARGET
	local lead
	lead=$(it_cl_current_leader)
	if [[ $lead != "$1" ]]; then
		etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "$(it_cl_ep "$lead")" \
			move-leader "$(it_member_id "$(it_cl_ep "$1")")" >/dev/null 2>&1 || true
	fi
	it_until 10000 it_leads "$(it_cl_ep "$1")"
}

# rev_past N: one of the three members answers with a store revision of N
# at least (the writer's puts, one revision each, got that far).
rev_past() {
	local i r
	for i in 0 1 2; do
		r=$(it_revision "$(it_cl_ep "$i")") && ((r >= $1)) && return 0
	done
	return 1
}

# run_cluster LABEL KIND0 KIND1 KIND2: member 0 leads first, then member 1.
run_cluster() {
	local label=$1 i wm
	local -a kinds=("$2" "$3" "$4")
	it_cl_init "$label" 3 x "$label."
	for i in 0 1 2; do it_cl_start "$i" "${kinds[i]}"; done
	for i in 0 1 2; do it_cl_answers "$i" "$label: x$i (${kinds[i]}) answers" || return 1; done
	check "$label: x0 (${kinds[0]}) leads" move_to 0
	local eps
	eps=$(it_cl_ep 0),$(it_cl_ep 1),$(it_cl_ep 2)
	run_model "$label.plain" -endpoint "$eps" -prefix "$label/p/" -ops 500 -watchers 24 -seed 11 -progress
	local rev0
	rev0=$(it_revision "$(it_cl_ep 0)")
	"$WM" -endpoint "$eps" -prefix "$label/m/" -ops 2000 -watchers 15 -seed 12 -puts-only -early \
		-progress >"$IT_TMP/$label.move.out" 2>&1 &
	wm=$!
	# with -early every watcher starts in the first tenth of the puts
	check "$label: the writer is past the first fifth of its puts (every watcher started)" \
		it_until 60000 rev_past $((rev0 + 400))
	check "$label: leadership moved to x1 (${kinds[1]}) mid-run" move_to 1
	if wait "$wm"; then
		ok "$label.move: $(grep -E '^(events|history|reconnects|progress)' "$IT_TMP/$label.move.out" | tr '\n' ' ')"
	else
		fail "$label.move"
		tail -25 "$IT_TMP/$label.move.out" | sed 's/^/    /'
	fi
	it_cl_stop 0 1 2
}

run_cluster a etcd cetcd cetcd
run_cluster b cetcd etcd etcd
it_summary
