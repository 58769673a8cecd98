#!/usr/bin/env bash
# Leases across members: renewals (LeaseKeepAlive) and remaining times
# (LeaseTimeToLive) sent to a follower are forwarded to the leader over
# the peer port (POST /leases, /leases/internal), as etcd 3.4 does it.
#   (a) three cetcd members: keep-alive and timetolive through every
#       member, a lease kept alive through a follower outlives several
#       TTLs, also while that follower is made the leader and then hands
#       leadership back, one left alone expires once (its key gone on
#       every member),
#       an unknown lease is reported unknown through a follower;
#   (b) Debian's etcd leading cetcd followers, and (c) a cetcd member
#       leading etcd followers: the same calls through every member.
# Exits 77 when the programs or Debian's etcd and etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd

ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }

# out CMD...: what etcdctl prints, its exit status ignored (the calls
# below look for etcd's error texts too).
out() { ctl "$@" 2>&1 || true; }
# renews EP ID: one keep-alive of lease ID (hex) through EP is answered
# with a positive TTL.
renews() { grep -qE "keepalived with TTL\([1-9]" <<<"$(out --endpoints "$1" lease keep-alive --once "$2")"; }
# ttl_ok EP ID: timetolive through EP reports the lease and its keys.
ttl_ok() { grep -qE "granted with TTL\([0-9]+s\), remaining\([0-9]+s\), attached keys\(\[.*k" <<<"$(out --endpoints "$1" lease timetolive --keys "$2")"; }
# unknown_ttl, unknown_renew EP ID: the lease is reported unknown through
# EP (by timetolive, by a keep-alive).
unknown_ttl() { grep -q "already expired" <<<"$(out --endpoints "$1" lease timetolive "$2")"; }
unknown_renew() { grep -q "requested lease not found" <<<"$(out --endpoints "$1" lease keep-alive --once "$2")"; }
grant() { ctl --endpoints "$1" lease grant "$2" | awk '{ print $2 }'; }
# gone_everywhere KEY: every member answers a get of KEY, without it (a
# member that does not answer has not deleted it)
gone_everywhere() {
	local i v
	for i in 0 1 2; do
		v=$(ctl --endpoints "$(it_cl_ep "$i")" get "$1" --print-value-only 2>/dev/null) && [[ -z $v ]] || return 1
	done
}

# run_cluster LABEL KIND0 KIND1 KIND2 LEADER: a cluster of those kinds,
# led by member LEADER.
run_cluster() {
	local label=$1 want=$5 i lead id kid
	local -a kinds=("$2" "$3" "$4")
	it_cl_init "$label" 3 x "$label."
	echo "# $label: ${kinds[*]}"
	for i in 0 1 2; do it_cl_start "$i" "${kinds[i]}"; done
	for i in 0 1 2; do it_cl_answers "$i" "$label: x$i (${kinds[i]}) answers" || return 1; done
	lead=$(it_cl_current_leader "$label: a member leads")
	if [[ $lead != "$want" ]]; then
		ctl --endpoints "$(it_cl_ep "$lead")" move-leader "$(it_member_id "$(it_cl_ep "$want")")" >/dev/null 2>&1 || true
	fi
	check "$label: x$want (${kinds[want]}) leads" it_until 10000 it_leads "$(it_cl_ep "$want")"
	lead=$want

	id=$(grant "$(it_cl_ep "$lead")" 30)
	ctl --endpoints "$(it_cl_ep "$lead")" put "k/$label/a" v --lease "$id" >/dev/null
	for i in 0 1 2; do
		check "$label: keep-alive through x$i (${kinds[i]}) renews" it_until 10000 renews "$(it_cl_ep "$i")" "$id"
		check "$label: timetolive through x$i (${kinds[i]}) reports the lease and its keys" \
			ttl_ok "$(it_cl_ep "$i")" "$id"
		check "$label: an unknown lease is unknown through x$i (timetolive)" unknown_ttl "$(it_cl_ep "$i")" 7777
		check "$label: an unknown lease is unknown through x$i (keep-alive)" unknown_renew "$(it_cl_ep "$i")" 7777
	done

	# a 4 s lease kept alive through a follower outlives three TTLs; one
	# left alone expires once and its key goes on every member
	local f ka t0
	f=$(it_cl_other "$lead")
	kid=$(grant "$(it_cl_ep "$lead")" 4)
	id=$(grant "$(it_cl_ep "$lead")" 4)
	ctl --endpoints "$(it_cl_ep "$lead")" put "k/$label/kept" v --lease "$kid" >/dev/null
	ctl --endpoints "$(it_cl_ep "$lead")" put "k/$label/left" v --lease "$id" >/dev/null
	ETCDCTL_API=3 etcdctl --endpoints "$(it_cl_ep "$f")" lease keep-alive "$kid" >"$IT_TMP/$label.ka" 2>&1 &
	ka=$!
	it_track "$ka"
	t0=$(it_now_ms)
	check "$label: the lease left alone expires and its key goes on every member" \
		it_until 15000 gone_everywhere "k/$label/left"
	sleep $(((12000 - ($(it_now_ms) - t0)) / 1000 + 1))
	check "$label: the lease kept alive through x$f (${kinds[f]}) outlives three TTLs" \
		test "$(ctl --endpoints "$(it_cl_ep "$lead")" get "k/$label/kept" --print-value-only)" = v
	check "$label: its renewals went through x$f" it_log_has "$IT_TMP/$label.ka" "keepalived with TTL\\(4\\)" 3
	# the member the renewals go through becomes the leader (its own
	# lessor answers them now, where it forwarded them), then leadership
	# moves back (it forwards again): the renewals go on, over two TTLs
	# each time, and the key stays
	local to cur n
	for to in "$f" "$lead"; do
		cur=$(it_cl_current_leader "$label: a member leads")
		ctl --endpoints "$(it_cl_ep "$cur")" move-leader "$(it_member_id "$(it_cl_ep "$to")")" >/dev/null 2>&1 || true
		check "$label: x$to (${kinds[to]}) leads while renewals go through x$f" \
			it_until 10000 it_leads "$(it_cl_ep "$to")"
		n=$(it_count "$IT_TMP/$label.ka" "keepalived with TTL\\(4\\)")
		sleep 9
		check "$label: with x$to leading, renewals through x$f go on" \
			it_log_has "$IT_TMP/$label.ka" "keepalived with TTL\\(4\\)" $((n + 3))
		check "$label: with x$to leading, the kept key stays" \
			test "$(ctl --endpoints "$(it_cl_ep "$to")" get "k/$label/kept" --print-value-only)" = v
	done
	check "$label: the keep-alive never reported the lease expired" \
		test "$(it_count "$IT_TMP/$label.ka" "expired or revoked")" = 0
	kill "$ka" 2>/dev/null || true
	wait "$ka" 2>/dev/null || true
	check "$label: once renewals stop it expires too" it_until 15000 gone_everywhere "k/$label/kept"
	it_cl_stop 0 1 2
}

# each cluster is a part of its own (it_parts), the three at once: they
# share nothing, and each spends its time in the leases' TTLs
if (($#)); then
	it_init "lease_cluster_$1"
	run_cluster "$@"
	it_summary
	exit
fi
it_init lease_cluster
it_parts "c3 cetcd cetcd cetcd 0" "etcdlead etcd cetcd cetcd 0" "cetcdlead cetcd etcd etcd 0"
it_summary
