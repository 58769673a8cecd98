#!/usr/bin/env bash
# Network partitions and lone daemon restarts in 3-member clusters: three
# cetcd members, then one Debian etcd 3.4 member and two cetcd members (the
# second is skipped without etcd). Every peer connection goes through tests/integration/peerproxy.py (the
# members advertise the proxy's ports), which cuts a member off from the
# others in both directions on the test's word. A writer on etcd's Go
# client records every acknowledged put through all three members while
# the test
#   - cuts the leader off: the other two elect a leader (how long it took
#     is printed: two election timeouts at most on a quiet machine) and
#     take writes; once the cut heals, the old leader follows the new one
#     and catches up;
#   - cuts a follower off, then heals it: writes go on, it catches up;
#   - SIGKILLs a cetcd follower's stored alone, then a cetcd follower's
#     raftd alone: the launcher restarts each, and the follower catches up
#     with no gap;
# and at the end no writer saw a violation, every acknowledged put is
# readable with its value through every member, and all members report
# the same revision, raft index and HashKV. Exits 77 when the programs, etcdctl, python3 or Go with Debian's
# clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_kvclient
it_init partition

ELECTION_MS=1000

# run LABEL KIND0 KIND1 KIND2: the whole scenario on one cluster of those kinds
# (etcd or cetcd).
run() {
	local -a kinds=("$2" "$3" "$4") ports ids acks wpids others
	local label=$1 i li fi_ t0 took stalled what old n out ackfiles proxy
	echo "# $label: ${kinds[*]}"
	it_cl_init "$label" 3 "$label"
	local names=("${IT_CL_NAMES[@]}")
	# per member: client port, real peer port, advertised (proxy) peer port
	it_cl_proxy "$label" || { fail "$label: the peer proxy starts"; return 1; }
	CUT=$IT_CL_CUT
	proxy=$IT_CL_PROXY
	pport() { echo "${IT_CL_PPORT[$1]}"; }
	aport() { echo "${IT_CL_APORT[$1]}"; }

	local zap=()
	for i in 0 1 2; do
		# etcd's log as JSON lines, as cetcd's (it_elected_after)
		[[ ${kinds[i]} == etcd ]] && zap=(--logger zap --log-outputs stderr) || zap=()
		it_cl_start "$i" "${kinds[i]}" "${zap[@]}" --election-timeout "$ELECTION_MS"
	done
	ep() { it_cl_ep "$1"; }

	for i in 0 1 2; do it_cl_answers "$i" "$label: member ${names[i]} answers" || exit 1; done
	ok "$label: three members answer through the peer proxy"

	for i in 0 1 2; do ids[i]=$(it_member_id "$(ep "$i")"); done
	# the proxy's control: which member each proxy port fronts, and (cut_off
	# ID) which member is cut off, if any
	cut_off() {
		{
			for i in 0 1 2; do echo "behind $(aport "$i") ${ids[i]}"; done
			[[ -n ${1:-} ]] && echo "cut $1"
		} >"$CUT.new"
		mv "$CUT.new" "$CUT"
	}
	cut_off

	# the index of a member that leads among those not in $1 (a list)
	leader_among() { it_cl_leader $(it_cl_but ${1:-}) >/dev/null; }
	current_leader() { it_cl_current_leader "$label: a member leads"; }
	check "$label: one member leads" it_until 10000 leader_among

	for i in 0 1 2; do
		acks[i]=$IT_TMP/$label.acks.$i
		it_kv_start "$IT_TMP/$label.writer.$i.out" write -endpoint "$(ep "$i")" -prefix "kv/m$i" \
			-acks "${acks[i]}" -writers 2 -per-conn 1
		wpids[i]=$IT_KV_PID
		check "$label: writes through ${names[i]} are acknowledged" it_wait_lines "${acks[i]}" 20 20
	done
	all_acks() { cat "${acks[@]}" 2>/dev/null | wc -l; }
	acks_of() { it_lines "${acks[$1]}"; }
	grown() { (($(acks_of "$1") >= $2)); }
	# writes through member $1 acknowledged again (20 more within 30 s)
	writes_through() { local at; at=$(acks_of "$1"); it_until 30000 grown "$1" $((at + 20)); }

	# ---- the leader cut off
	li=$(current_leader)
	cut_off "${ids[li]}"
	mapfile -t others < <(it_cl_but "$li")
	check "$label: cut off the leader (${names[li]}): the other two elect a leader" \
		it_until 30000 leader_among "$li"
	# the cut as the proxy applied it (when: its log says)
	cut_at() { sed -n "s/^cut at \([0-9]*\): ${ids[li]}\$/\1/p" "$IT_TMP/$label.proxy.log" | tail -n 1; }
	check "$label: the proxy cut ${names[li]} off" eval '[[ -n $(cut_at) ]]'
	# from the cut to the first leader the other two log, as information:
	# on a quiet machine two election timeouts, and two ticks for the
	# clock's grain and the vote's round trip
	t0=$(cut_at)
	took=
	[[ -n $t0 ]] && took=$(for i in "${others[@]}"; do it_elected_after "$(it_cl_log "$i")" "$t0"; done | sort -n | head -n 1)
	echo "  a leader among the other two ${took:-?} ms after the cut" \
		"(election timeout $ELECTION_MS ms; $((2 * ELECTION_MS + 200)) ms at most on a quiet machine)"
	for i in "${others[@]}"; do
		check "$label: writes through ${names[i]} go on while ${names[li]} is cut off" writes_through "$i"
	done
	stalled=$(acks_of "$li")
	sleep 1
	check "$label: no write through the cut-off ${names[li]} is acknowledged" test "$(acks_of "$li")" -eq "$stalled"
	cut_off
	check "$label: healed: ${names[li]} follows, writes through it are acknowledged again" writes_through "$li"
	check "$label: healed: one leader, among the two that kept the quorum" \
		it_until 30000 leader_among "$li"

	# ---- a follower cut off
	li=$(current_leader)
	fi_=$(((li + 1) % 3))
	cut_off "${ids[fi_]}"
	sleep $((2 * ELECTION_MS / 1000 + 1))
	check "$label: cut off a follower (${names[fi_]}): the leader stays" it_leads "$(ep "$li")"
	check "$label: writes through the leader go on" writes_through "$li"
	cut_off
	check "$label: healed: writes through ${names[fi_]} are acknowledged again" writes_through "$fi_"
	# a cetcd member campaigns with a pre-vote first (etcd 3.4 does not by
	# default): back from the cut it finds the leader alive and follows
	[[ ${kinds[fi_]} == cetcd ]] &&
		check "$label: healed: ${names[fi_]} (cetcd, pre-vote) did not depose the leader" it_leads "$(ep "$li")"

	# ---- a follower's stored alone, then a follower's raftd alone
	restarted() { IT_CETCD_PID=$1 it_new_child "$2" "$3" >/dev/null; }
	# a cetcd member other than $1
	cetcd_follower() {
		local i
		for i in 1 2 0; do
			[[ $i != "$1" && ${kinds[i]} == cetcd ]] && { echo "$i"; return 0; }
		done
	}
	for what in stored raftd; do
		li=$(current_leader)
		fi_=$(cetcd_follower "$li")
		old=$(IT_CETCD_PID=${IT_CL_PIDS[fi_]} it_cetcd_child "$what")
		kill -9 "$old"
		check "$label: SIGKILL of ${names[fi_]}'s $what alone: the launcher restarts it" \
			it_until 20000 restarted "${IT_CL_PIDS[fi_]}" "$what" "$old"
		check "$label: writes through ${names[fi_]} are acknowledged again" writes_through "$fi_"
	done

	for i in 0 1 2; do
		check "$label: the writer through ${names[i]} saw no violation" \
			it_kv_stop "${wpids[i]}" "$IT_TMP/$label.writer.$i.out"
	done
	n=$(all_acks)
	echo "  $n puts acknowledged"
	ackfiles=$(IFS=,; echo "${acks[*]}")
	for i in 0 1 2; do
		check "$label: all $n acknowledged puts are there, read through ${names[i]}" \
			it_acked_at "$(ep "$i")" kv "$ackfiles" "$n"
	done
	check "$label: all members report the same revision and raft index" \
		it_agreed 15000 it_same_state "$(ep 0)" "$(ep 1)" "$(ep 2)"
	check "$label: all members report the same HashKV" \
		it_agreed 15000 it_same_hashkv "$(ep 0)" "$(ep 1)" "$(ep 2)"
	echo "  connections the proxy refused or cut: $(it_count "$IT_TMP/$label.proxy.log" '^(closing|refused)')"
	kill "$proxy" 2>/dev/null || true
	it_cl_stop 0 1 2
}

run p cetcd cetcd cetcd
if command -v etcd >/dev/null; then
	run q etcd cetcd cetcd
else
	echo "# q: skipped, Debian's etcd is not installed"
fi
it_summary
