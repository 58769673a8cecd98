#!/usr/bin/env bash
# Replacing the members of a running cluster one by one with members of
# the other kind, through `etcdctl member add` and `--initial-cluster-state
# existing`, on etcd's peer protocol:
#   (c) a 3-member cluster of Debian's etcd 3.4 under writers through every
#       member: once the leader compacted its log, a cetcd member joins and
#       catches up by a snapshot (the leader's db); then each
#       etcd member in turn is removed and a new cetcd member joins in its
#       place, until the cluster is all cetcd;
#   (d) the same from a cetcd cluster to an all-etcd one.
# A joining member learns its id from a peer's /members (an etcd member
# from cetcd's, a cetcd member from etcd's) and the members from the
# leader's log. Writes go on after every join and every removal, and at
# the end no writer saw a violation, no acknowledged put is lost (each is
# read with its value through every member) and all members report the
# same revision, raft index and HashKV; how long each writer went without
# an acknowledged put is printed. Every member runs with --snapshot-count
# 500, so logs are compacted (past 5,000 entries kept for catch-up) while
# the test runs. Exits 77 when the programs, Debian's etcd and
# etcdctl, python3 or Go with Debian's clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_build_kvclient
it_init mixedjoin

ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }

# run_replace LABEL FROM TO: a cluster of three FROM members becomes one
# of four TO members.
run_replace() {
	local label=$1 from=$2 to=$3 i
	local -a kinds acks wpids live
	it_cl_init "$label" 7 x "$label."
	ep() { it_cl_ep "$1"; }
	purl() { it_cl_purl "$1"; }
	# start I KIND: one of the first three; join_as I KIND INITIAL: a member
	# added to the running cluster
	start() { kinds[$1]=$2; it_cl_start "$1" "$2" --snapshot-count 500; }
	join_as() { kinds[$1]=$2; it_cl_join "$1" "$2" "$3" --snapshot-count 500; }
	rev_of() { it_revision "$(ep "$1")"; }
	rev_at_least() { local r; r=$(rev_of "$1") && ((r >= $2)); }
	id_of() { it_member_id "$(ep "$1")"; }
	live_eps() { local i s=""; for i in "${live[@]}"; do s+="${s:+ }$(ep "$i")"; done; echo "$s"; }
	# the names the member at $1 lists, sorted ("?" for one not started)
	names_at() { it_member_names "$(ep "$1")"; }
	all_list() {
		local want=$1 i
		for i in "${live[@]}"; do [[ $(names_at "$i") == "$want" ]] || return 1; done
	}
	want_names() { local i s=""; for i in $(printf '%s\n' "${live[@]}" | sort -n); do s+="${s:+,}x$i"; done; echo "$s"; }
	all_acks() { cat "${acks[@]}" 2>/dev/null | wc -l; }
	more_acks() { (($(all_acks) >= $1)); }
	flowing() { local at; at=$(all_acks); it_until 30000 more_acks $((at + 20)); }
	writer() {
		acks[$1]=$IT_TMP/$label.acks.$1
		it_kv_start "$IT_TMP/$label.writer.$1.out" write -endpoint "$(ep "$1")" \
			-prefix "kv/$label/m$1" -acks "${acks[$1]}" -writers 2 -per-conn 1
		wpids[$1]=$IT_KV_PID
		check "$label: writes through x$1 (${kinds[$1]}) are acknowledged" it_wait_lines "${acks[$1]}" 20 30
	}
	# join I: member add x$I (kind $to) through a live member, start it
	# with existing, wait until it serves with the added id and caught up
	# join I [learner]: as a learner, it is promoted through x3 (the first
	# member of the other kind) while a member of the first kind leads:
	# refused before it started, accepted once it caught up
	join() {
		local i=$1 as=${2:-} via=${live[0]} out added initial r0 learner=()
		[[ $as == learner ]] && learner=(--learner)
		# etcd refuses reconfiguration until its peers were active for 5 s
		# (--strict-reconfig-check): asked again meanwhile
		added_ok() {
			ctl --endpoints "$(ep "$via")" member add "x$i" "${learner[@]}" --peer-urls "$(purl "$i")" \
				>"$IT_TMP/$label.add.$i" 2>&1
		}
		it_until 30000 added_ok || true
		out=$(cat "$IT_TMP/$label.add.$i")
		added=$(sed -nE 's/^Member +([0-9a-f]+) added to cluster.*/\1/p' <<<"$out")
		initial=$(sed -nE 's/^ETCD_INITIAL_CLUSTER="(.*)"$/\1/p' <<<"$out")
		check "$label: member add x$i ($to) through x$via (${kinds[via]})" test -n "$added" -a -n "$initial"
		[[ $as == learner ]] && promote_refused "$added"
		join_as "$i" "$to" "$initial"
		[[ $as == learner ]] && promote_accepted "$i" "$added"
		it_member_answers "${IT_CL_CPORT[i]}" "$IT_TMP/$label.x$i.log" "$label: x$i ($to) joins and answers" ||
			return 1
		check "$label: x$i serves with the id the cluster gave it ($added)" test "$(id_of "$i")" = "$added"
		r0=$(rev_of "$via")
		check "$label: x$i caught up (revision $r0 and on)" it_until 60000 rev_at_least "$i" "$r0"
		if [[ $as == snapshot ]]; then
			# etcd's line, or cetcd's once its stored installed the db
			check "$label: x$i ($to) caught up by a snapshot from the leader" \
				it_wait_log "$IT_TMP/$label.x$i.log" \
				'finished applying incoming snapshot|"msg":"installed the received snapshot db"' 30
		fi
		live+=("$i")
		check "$label: every member lists $(want_names)" it_until 20000 all_list "$(want_names)"
		writer "$i"
		check "$label: writes go on with x$i" flowing
	}
	# x3 is a follower and x${live[0]} (of the first kind) leads
	x3_follows() {
		local j first=${live[0]}
		it_leads "$(ep "$first")" && return 0
		for j in "${live[@]}"; do
			it_leads "$(ep "$j")" || continue
			ctl --endpoints "$(ep "$j")" move-leader "$(id_of "$first")" >/dev/null 2>&1 || true
		done
		it_until 30000 it_leads "$(ep "$first")"
	}
	promote_refused() {
		local out
		check "$label: x${live[0]} (${kinds[live[0]]}) leads, x3 follows" x3_follows
		out=$(ctl --endpoints "$(ep 3)" member promote "$1" 2>&1 || true)
		check "$label: promoting learner $1 through follower x3 (${kinds[3]}) before it started: the leader's refusal" \
			grep -q "etcdserver: can only promote a learner member which is in sync with leader" <<<"$out"
	}
	is_promoted() {
		ctl --endpoints "$(ep 3)" member promote "$1" >"$IT_TMP/$label.promote" 2>&1
	}
	promote_accepted() {
		local r0
		r0=$(rev_of 3)
		it_until 60000 rev_at_least "$1" "$r0" || true
		check "$label: x${live[0]} (${kinds[live[0]]}) leads, x3 follows" x3_follows
		check "$label: promoting learner $2 through follower x3 (${kinds[3]}) once it caught up" \
			it_until 30000 is_promoted "$2"
		sed 's/^/    /' "$IT_TMP/$label.promote"
	}
	# leave I: the writer through x$I stops, x$I is removed through another
	# member and stops
	leave() {
		local i=$1 via id j out
		check "$label: the writer through x$i (${kinds[i]}) saw no violation" \
			it_kv_stop "${wpids[i]}" "$IT_TMP/$label.writer.$i.out"
		id=$(id_of "$i")
		local -a rest=()
		for j in "${live[@]}"; do [[ $j != "$i" ]] && rest+=("$j"); done
		via=${rest[0]}
		removed_ok() { ctl --endpoints "$(ep "$via")" member remove "$id" >"$IT_TMP/$label.rm.$i" 2>&1; }
		it_until 30000 removed_ok || true
		out=$(cat "$IT_TMP/$label.rm.$i")
		check "$label: member remove x$i (${kinds[i]}, $id) through x$via" grep -q "removed from cluster" <<<"$out"
		live=("${rest[@]}")
		if it_wait_gone "${IT_CL_PIDS[i]}" 30000; then
			ok "$label: the removed x$i stops"
		else
			fail "$label: the removed x$i stops"
			it_cl_stop "$i"
		fi
		check "$label: writes go on without x$i" flowing
		check "$label: every member lists $(want_names)" it_until 20000 all_list "$(want_names)"
	}

	echo "# $label: three $from members become four $to members"
	for i in 0 1 2; do start "$i" "$from"; done
	for i in 0 1 2; do
		it_member_answers "${IT_CL_CPORT[i]}" "$IT_TMP/$label.x$i.log" "$label: x$i ($from) answers" ||
			return 1
	done
	live=(0 1 2)
	for i in 0 1 2; do writer "$i"; done

	# past the 5,000 entries a leader keeps for catch-up after a snapshot
	check "$label: the cluster is past revision 7000" it_until 120000 rev_at_least 0 7000
	join 3 snapshot || return 1
	for i in 0 1 2; do
		leave "$i"
		if ((i == 1)); then join $((i + 4)) learner || return 1; else join $((i + 4)) || return 1; fi
	done

	for i in "${live[@]}"; do
		check "$label: the writer through x$i (${kinds[i]}) saw no violation" \
			it_kv_stop "${wpids[i]}" "$IT_TMP/$label.writer.$i.out"
	done
	# The longest time each writer saw no put go through, and the longest
	# put, as information (the machine may be busy). On a quiet machine a
	# cetcd member answers a put lost in a leader change "leader changed"
	# once the next term settles, so its writers wait about one election
	# (up to two election timeouts of 1 s); an etcd member leaves it to the
	# client's 5 s timeout, so its writers wait that and one election more.
	for i in "${!wpids[@]}"; do
		echo "  $label: writer through x$i (${kinds[i]}):" \
			"longest put $(it_kv_fig "$IT_TMP/$label.writer.$i.out" max-put-ms) ms," \
			"longest gap between acknowledged puts $(it_kv_fig "$IT_TMP/$label.writer.$i.out" max-gap-ms) ms"
	done
	local n files
	n=$(all_acks)
	files=$(IFS=,; echo "${acks[*]}")
	echo "  $label: $n puts acknowledged; members now: $(for i in "${live[@]}"; do printf 'x%s(%s) ' "$i" "${kinds[i]}"; done)"
	for i in "${live[@]}"; do
		check "$label: all $n acknowledged puts are there through x$i (${kinds[i]})" \
			it_acked_at "$(ep "$i")" "kv/$label" "$files" "$n"
	done
	check "$label: all members report the same revision and raft index" \
		it_agreed 15000 it_same_state $(live_eps)
	check "$label: all members report the same HashKV" it_agreed 15000 it_same_hashkv $(live_eps)
	it_cl_stop "${live[@]}"
}

run_replace c etcd cetcd
run_replace d cetcd etcd
it_summary
