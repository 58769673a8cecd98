#!/usr/bin/env bash
# Mixed clusters of Debian's etcd 3.4 and cetcd members, on etcd's own
# peer protocol: (a) two etcd members and one cetcd member, (b) one etcd
# member and two cetcd members. In each, a writer on etcd's Go client puts
# through every member and records every acknowledged put while the test
#   - moves the leader to each member in turn (etcdctl move-leader), and
#     checks that member then leads;
#   - SIGKILLs an etcd member and a cetcd member in turn and restarts
#     each on its data dir;
# and at the end no writer saw a violation, every acknowledged put is
# readable with its value through every member, and all members report the same revision, the same raft
# index and the same HashKV (etcd's and cetcd's computed the same way).
# Exits 77 when the programs, Debian's etcd and etcdctl, python3 or Go
# with Debian's clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_build_kvclient
it_init mixed

ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }

# run_cluster LABEL KIND0 KIND1 KIND2: one cluster of those kinds.
run_cluster() {
	local label=$1 i
	local -a kinds=("$2" "$3" "$4") acks wpids
	it_cl_init "$label" 3 x "$label."
	ep() { it_cl_ep "$1"; }
	start() { it_cl_start "$1" "${kinds[$1]}"; }
	leads() { it_leads "$(ep "$1")"; }

	echo "# $label: ${kinds[*]}"
	for i in 0 1 2; do start "$i"; done
	for i in 0 1 2; do it_cl_answers "$i" "$label: x$i (${kinds[i]}) answers" || return 1; done
	ok "$label: three members answer"
	check "$label: every member lists three started members" \
		test "$(it_member_names "$(ep 2)")" = "x0,x1,x2"

	for i in 0 1 2; do
		acks[i]=$IT_TMP/$label.acks.$i
		it_kv_start "$IT_TMP/$label.writer.$i.out" write -endpoint "$(ep "$i")" \
			-prefix "kv/$label/m$i" -acks "${acks[i]}" -writers 2 -per-conn 1
		wpids[i]=$IT_KV_PID
		check "$label: writes through x$i (${kinds[i]}) are acknowledged" \
			it_wait_lines "${acks[i]}" 20 30
	done
	all_acks() { cat "${acks[@]}" 2>/dev/null | wc -l; }
	more_acks() { (($(all_acks) >= $1)); }
	flowing() { local at; at=$(all_acks); it_until 30000 more_acks $((at + 20)); }

	# the leader to each member in turn
	local target tid lead
	for target in 0 1 2; do
		tid=$(it_member_id "$(ep "$target")")
		lead=$(it_cl_leader) || lead=""
		if [[ -n $lead && $lead != "$target" ]]; then
			ctl --endpoints "$(ep "$lead")" move-leader "$tid" >/dev/null 2>&1 || true
		fi
		check "$label: leadership moved to x$target (${kinds[target]})" it_until 10000 leads "$target"
		check "$label: writes go on under x$target's lead" flowing
	done

	# an etcd member and a cetcd member killed and restarted
	local kind victim
	for kind in etcd cetcd; do
		victim=""
		for i in 0 1 2; do [[ ${kinds[i]} == "$kind" ]] && victim=$i; done
		it_cl_kill "$victim"
		check "$label: $kind member x$victim SIGKILLed: writes go on" flowing
		start "$victim"
		check "$label: $kind member x$victim comes back" it_wait_healthy "${IT_CL_CPORT[victim]}" 60
		check "$label: writes go on after x$victim restarted" flowing
	done

	for i in 0 1 2; do
		check "$label: the writer through x$i (${kinds[i]}) saw no violation" \
			it_kv_stop "${wpids[i]}" "$IT_TMP/$label.writer.$i.out"
	done
	local n files
	n=$(all_acks)
	files=$(IFS=,; echo "${acks[*]}")
	echo "  $label: $n puts acknowledged"
	for i in 0 1 2; do
		check "$label: all $n acknowledged puts are there through x$i (${kinds[i]})" \
			it_acked_at "$(ep "$i")" "kv/$label" "$files" "$n"
	done
	check "$label: all members report the same revision and raft index" \
		it_agreed 15000 it_same_state "$(ep 0)" "$(ep 1)" "$(ep 2)"
	check "$label: all members report the same HashKV" \
		it_agreed 15000 it_same_hashkv "$(ep 0)" "$(ep 1)" "$(ep 2)"
	# Maintenance.Hash covers the whole db but the consistent index (and
	# cetcd's own buckets): the members, cluster version and auth buckets
	# must match etcd's byte for byte
	check "$label: all members report the same Maintenance.Hash" \
		it_agreed 15000 it_same_hash "$(ep 0)" "$(ep 1)" "$(ep 2)"
	it_cl_stop 0 1 2
}

run_cluster a etcd etcd cetcd
run_cluster b etcd cetcd cetcd
it_summary
