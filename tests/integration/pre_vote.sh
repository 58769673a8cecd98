#!/usr/bin/env bash
# --pre-vote, on (cetcd's default) and off (etcd 3.4's default): three
# cetcd members whose peer connections go through
# tests/integration/peerproxy.py; a follower is cut off for several
# election timeouts, then the cut heals.
#   - with --pre-vote=false the follower campaigns at once (its log says
#     "became candidate", never "became pre-candidate"), raising its term
#     each time; back, its term deposes the leader: the cluster goes on in
#     a term above the one it had;
#   - by default it stays a pre-candidate in the old term, and back, the
#     leader and its term stay.
# Both take writes at the end. Exits 77 when the programs, etcdctl or
# python3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init pre_vote

ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }

# run LABEL [flags...]: the scenario on a cluster of three members started
# with the flags; sets TERM_BEFORE, TERM_AFTER (the leader's, before the
# cut and once healed) and CUT_LOG (the cut member's log).
run() {
	local label=$1 i f li
	shift
	it_cl_init "$label" 3 "$label"
	it_cl_proxy "$label" || { fail "$label: the peer proxy starts"; return 1; }
	local cut=$IT_CL_CUT
	for i in 0 1 2; do it_cl_start "$i" cetcd "$@"; done
	for i in 0 1 2; do it_cl_answers "$i" "$label: member $i answers" || return 1; done
	li=$(it_cl_current_leader "$label: a member leads")
	f=$(( (li + 1) % 3 ))
	local ids=()
	for i in 0 1 2; do ids[i]=$(it_member_id "$(it_cl_ep "$i")"); done
	term_of() { it_status "$(it_cl_ep "$1")" 'd["header"]["raft_term"]'; }
	TERM_BEFORE=$(term_of "$li")
	ok "$label: member $li leads in term $TERM_BEFORE; member $f is cut off"
	{
		for i in 0 1 2; do echo "behind ${IT_CL_APORT[i]} ${ids[i]}"; done
		echo "cut ${ids[f]}"
	} >"$cut.new"
	mv "$cut.new" "$cut"
	CUT_LOG=$(it_cl_log "$f")
	# cut off for four election timeouts (1 s each) at least; without
	# pre-vote, until the member's own term rose by 3 too
	local t_cut
	t_cut=$(it_now_ms)
	alone() {
		(($(it_now_ms) - t_cut >= 4000)) || return 1
		[[ $label != off ]] || (($(term_of "$f") >= TERM_BEFORE + 3))
	}
	check "$label: the cut-off member campaigns alone" it_until 20000 alone
	: >"$cut.new"
	for i in 0 1 2; do echo "behind ${IT_CL_APORT[i]} ${ids[i]}" >>"$cut.new"; done
	mv "$cut.new" "$cut"
	it_until 10000 ctl --endpoints "$(it_cl_ep "$li")" put "$label/after" v >/dev/null || true
	healed() { li=$(it_cl_leader) && ctl --endpoints "$(it_cl_ep "$f")" get "$label/after" | grep -q after; }
	check "$label: healed, a member leads and the cut-off member caught up" it_until 30000 healed
	TERM_AFTER=$(term_of "$li")
	check "$label: a put is acknowledged" ctl --endpoints "$(it_cl_ep "$li")" put "$label/end" v
	it_cl_stop 0 1 2
	kill "$IT_CL_PROXY" 2>/dev/null || true
	wait "$IT_CL_PROXY" 2>/dev/null || true
}

run off --pre-vote=false
pre_off=$(it_count "$CUT_LOG" '"msg":"[0-9a-f]+ became pre-candidate')
check "off: the cut-off member never became a pre-candidate ($pre_off)" test "$pre_off" -eq 0
check "off: it became a candidate" it_log_has "$CUT_LOG" '"msg":"[0-9a-f]+ became candidate' 1
check "off: back, its term deposed the leader (term $TERM_BEFORE -> $TERM_AFTER)" \
	test "$TERM_AFTER" -gt "$TERM_BEFORE"

run on
check "on: the cut-off member became a pre-candidate" \
	it_log_has "$CUT_LOG" '"msg":"[0-9a-f]+ became pre-candidate' 1
cand=$(it_count "$CUT_LOG" '"msg":"[0-9a-f]+ became candidate')
check "on: and never a candidate ($cand)" test "$cand" -eq 0
check "on: back, the leader kept its term ($TERM_BEFORE -> $TERM_AFTER)" \
	test "$TERM_AFTER" -eq "$TERM_BEFORE"
it_summary
