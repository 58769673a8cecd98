#!/usr/bin/env bash
# Raft snapshots between members, on etcd's peer protocol, with a small
# --snapshot-count (100) on every member:
#   (a) three cetcd members: a cetcd leader sends a cetcd follower a
#       snapshot; the follower keeps its WAL in a --wal-dir of its own,
#       where the snapshot's record goes, and never in its data dir;
#   (b) etcd, etcd, cetcd with an etcd leader: etcd sends cetcd one;
#   (c) cetcd, cetcd, etcd with a cetcd leader: cetcd sends etcd one;
#   (d) as (a), with the follower's raftd and stored SIGKILLed after raftd
#       took the snapshot and before stored could install it.
# A cetcd follower's stored gives the db file the install replaced back
# to the file system a step at a time (its "gave the replaced db file's
# space back" line).
# In each, writers on etcd's Go client put through the two other members
# while the follower is stopped (SIGSTOP) long enough for the leader's log
# to be compacted past it (etcd and cetcd keep 5000 entries behind the
# snapshot); when it resumes it must catch up by a snapshot (the log
# lines of both sides say so), and at the end no writer saw a violation,
# every acknowledged put is readable with its value through every member
# (the follower restarted once after the snapshot), and all members report
# the same revision, raft index and HashKV.
# Exits 77 when the programs, Debian's etcd and etcdctl, python3 or Go
# with Debian's clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_build_kvclient
it_init snapcl

ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }

# run_case LABEL KIND0 KIND1 KIND2 LEADER LAGGER [crash]
# With crash (a cetcd lagger), its stored stays stopped while raftd takes
# the snapshot, and raftd and stored are then SIGKILLed together: the
# restarted raftd must hand the restarted stored the db again.
run_case() {
	local label=$1 lead_at=$5 lag=$6 crash=${7:-} i
	local -a kinds=("$2" "$3" "$4") acks wpids
	it_cl_init "$label" 3 s "$label."
	ep() { it_cl_ep "$1"; }
	logf() { it_cl_log "$1"; }
	local -a walflag=()
	local waldir=$IT_TMP/$label.wal.s$lag
	[[ $label == a ]] && walflag=(--wal-dir "$waldir")
	start() {
		if [[ $1 == "$lag" ]]; then
			it_cl_start "$1" "${kinds[$1]}" --snapshot-count 100 "${walflag[@]}"
		else
			it_cl_start "$1" "${kinds[$1]}" --snapshot-count 100
		fi
	}
	procs() { it_cl_procs "$1"; }
	# member $1's raft index, asked for up to 20 s (none: the test stops,
	# which fails it; a 0 would make "compacted past it" hollow)
	index_at() { it_status "$(ep "$1")" 'd["raftIndex"]' 2>/dev/null; }
	index_of() { it_until 20000 index_at "$1"; }
	leads() { it_leads "$(ep "$1")"; }

	echo "# $label: ${kinds[*]}, leader s$lead_at (${kinds[lead_at]}), s$lag (${kinds[lag]}) falls behind"
	for i in 0 1 2; do start "$i"; done
	for i in 0 1 2; do it_cl_answers "$i" "$label: s$i (${kinds[i]}) answers" || return 1; done
	ok "$label: three members answer"
	local lead
	lead=$(it_cl_leader) || lead=""
	if [[ $lead != "$lead_at" ]]; then
		ctl --endpoints "$(ep "${lead:-0}")" move-leader "$(it_member_id "$(ep "$lead_at")")" >/dev/null 2>&1 || true
	fi
	check "$label: s$lead_at (${kinds[lead_at]}) leads" it_until 15000 leads "$lead_at"

	local -a writers=()
	for i in 0 1 2; do [[ $i != "$lag" ]] && writers+=("$i"); done
	for i in "${writers[@]}"; do
		acks[i]=$IT_TMP/$label.acks.$i
		it_kv_start "$IT_TMP/$label.writer.$i.out" write -endpoint "$(ep "$i")" \
			-prefix "kv/$label/m$i" -acks "${acks[i]}" -writers 4 -per-conn 4
		wpids[i]=$IT_KV_PID
		check "$label: writes through s$i (${kinds[i]}) are acknowledged" \
			it_wait_lines "${acks[i]}" 20 30
	done

	local lag_index lead_index
	lag_index=$(index_of "$lag")
	kill -STOP $(procs "$lag")
	ok "$label: s$lag (${kinds[lag]}) stopped at raft index $lag_index"
	# the leader's newest .snap file: its log is compacted 5000 entries
	# (and, in cetcd, up to 1024 more) behind it
	newest_snap() {
		local h
		h=$(ls "$IT_TMP/$label.s$lead_at/member/snap" 2>/dev/null |
			sed -n 's/^[0-9a-f]\{16\}-\([0-9a-f]\{16\}\)\.snap$/\1/p' | sort | tail -1)
		echo $((16#${h:-0}))
	}
	# (the member may apply a little more between the status read and the
	# stop: a wide margin)
	far() { (($(newest_snap) > lag_index + 12000)); }
	check "$label: the leader's log was compacted past it" it_until 240000 far
	lead_index=$(index_of "$lead_at")
	local stored_pid="" raftd_pid="" p
	if [[ -n $crash ]]; then
		for p in $(procs "$lag"); do
			case $(tr '\0' ' ' <"/proc/$p/cmdline") in
			*/stored\ *) stored_pid=$p ;;
			*/raftd\ *) raftd_pid=$p ;;
			esac
		done
		kill -CONT $(procs "$lag" | tr ' ' '\n' | grep -vx "$stored_pid")
		echo "  $label: s$lag resumed but its stored ($stored_pid); the leader is at raft index $lead_index"
		check "$label: its raftd takes the snapshot and hands the db on" \
			it_wait_log "$(logf "$lag")" '"msg":"handed stored a received snapshot to install"' 60
		kill -9 "$raftd_pid" "$stored_pid"
		ok "$label: its raftd and its stopped stored SIGKILLed"
		check "$label: the member comes back" it_wait_healthy "${IT_CL_CPORT[lag]}" 60
		check "$label: the restarted raftd starts from the received snapshot" \
			it_wait_log "$(logf "$lag")" '"msg":"recovered v2 store from snapshot"' 30
	else
		kill -CONT $(procs "$lag")
		echo "  $label: s$lag resumed; the leader is at raft index $lead_index"
	fi
	if [[ ${kinds[lead_at]} == cetcd ]]; then
		check "$label: the cetcd leader sent it a snapshot" \
			it_wait_log "$(logf "$lead_at")" '"msg":"sent database snapshot"' 60
	else
		check "$label: the etcd leader sent it a snapshot" \
			it_wait_log "$(logf "$lead_at")" 'sent database snapshot|database snapshot \[index: [0-9]+, to: [0-9a-f]+\] sent out successfully' 60
	fi
	if [[ ${kinds[lag]} == cetcd ]]; then
		check "$label: the cetcd follower applied it" \
			it_wait_log "$(logf "$lag")" '"msg":"applying snapshot"' 60
		check "$label: and its stored installed the db" \
			it_wait_log "$(logf "$lag")" '"msg":"installing a received snapshot db"' 60
		# the file the install replaced goes back to the file system a
		# step at a time once no reader reads it, not at its last close
		check "$label: and the file the install replaced went back" \
			it_wait_log "$(logf "$lag")" '"msg":"gave the replaced db file.s space back","bytes":[0-9]+,"left-bytes":0,' 60
	else
		check "$label: the etcd follower applied it" \
			it_wait_log "$(logf "$lag")" 'applied incoming snapshot|finished applying incoming snapshot' 60
	fi
	all_acks() { cat "${acks[@]}" 2>/dev/null | wc -l; }
	more_acks() { (($(all_acks) >= $1)); }
	flowing() { local at; at=$(all_acks); it_until 30000 more_acks $((at + 20)); }
	check "$label: writes go on" flowing
	if [[ ${kinds[lead_at]} == cetcd ]]; then
		# the follower's answers to MsgApps sent before the snapshot, and
		# compaction right after the send, must not make the leader send
		# another one (each did before)
		sends=$(grep -c '"msg":"sent database snapshot"' "$(logf "$lead_at")" || true)
		check "$label: the cetcd leader sent one snapshot, not more ($sends)" test "$sends" = 1
	fi
	# a restart from the snapshot it received
	it_cl_stop "$lag"
	start "$lag"
	check "$label: s$lag (${kinds[lag]}) restarts after the snapshot" \
		it_wait_healthy "${IT_CL_CPORT[lag]}" 60
	check "$label: writes go on" flowing
	if ((${#walflag[@]})); then
		local segs
		segs=$(ls "$waldir" | grep -c '\.wal$' || true)
		check "$label: s$lag's WAL segments are in its --wal-dir ($segs)" test "$segs" -gt 0
		check "$label: and its data dir has no member/wal" \
			test ! -e "$IT_TMP/$label.s$lag/member/wal"
	fi

	for i in "${writers[@]}"; do
		check "$label: the writer through s$i (${kinds[i]}) saw no violation" \
			it_kv_stop "${wpids[i]}" "$IT_TMP/$label.writer.$i.out"
	done
	local n files
	n=$(cat "${acks[@]}" | wc -l)
	files=$(IFS=,; echo "${acks[*]}")
	echo "  $label: $n puts acknowledged"
	check "$label: all members report the same revision and raft index" \
		it_agreed 60000 it_same_state "$(ep 0)" "$(ep 1)" "$(ep 2)"
	for i in "$lag" "${writers[@]}"; do
		check "$label: all $n acknowledged puts are there through s$i (${kinds[i]})" \
			it_acked_at "$(ep "$i")" "kv/$label" "$files" "$n"
	done
	check "$label: all members report the same HashKV" \
		it_agreed 15000 it_same_hashkv "$(ep 0)" "$(ep 1)" "$(ep 2)"
	it_cl_stop 0 1 2
}

cases=${SNAP_CLUSTER_CASES:-a b c d}
[[ $cases == *a* ]] && run_case a cetcd cetcd cetcd 0 2
[[ $cases == *b* ]] && run_case b etcd etcd cetcd 0 2
[[ $cases == *c* ]] && run_case c cetcd cetcd etcd 0 2
[[ $cases == *d* ]] && run_case d cetcd cetcd cetcd 0 2 crash
it_summary
