#!/usr/bin/env bash
# Members joining a running cetcd cluster, as etcd 3.4's do:
#   - a 3-member cluster under writers through every member (every
#     acknowledged put recorded); `etcdctl member add` a 4th member and
#     start it with --initial-cluster-state existing: it takes the id the
#     cluster gave it (from a peer's /members), learns the members from
#     the leader's log, publishes itself and catches up;
#   - a learner added and started the same way; promoting it through a
#     follower's endpoint is forwarded to the leader (etcd's POST
#     /members/promote/<id> on the peer port): refused with etcd's error
#     while the learner has not caught up, accepted once it has; its
#     Status says isLearner until then;
#   - a member removed under load;
#   - the joined member restarted: same member and cluster id;
#   - a member that joins with a peer URL the cluster does not know is
#     refused with etcd's error;
# at the end no writer saw a violation, every acknowledged put is readable
# through every member and all members report the same revision, raft
# index and HashKV.
# Exits 77 when the programs, etcdctl, python3 or Go with Debian's
# clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_kvclient
it_init join

ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }
it_cl_init join-test 6 j
names=("${IT_CL_NAMES[@]}")
logs=("${IT_CL_LOG[@]}")
purl() { it_cl_purl "$1"; }
ep() { it_cl_ep "$1"; }
# "member-id cluster-id" (decimal) as member $1 reports them
ids_of() { it_status "$(ep "$1")" 'd["header"]["member_id"], d["header"]["cluster_id"]'; }
# the member id (hex) that `member list` gives the member named $2, asked
# at member $1
listed_id() {
	ctl --endpoints "$(ep "$1")" member list -w json |
		python3 -c 'import json,sys
for m in json.load(sys.stdin)["members"]:
    if m.get("name","") == sys.argv[1] or (not m.get("name") and sys.argv[2] in m["peerURLs"]):
        print("%x" % m["ID"])' "$2" "$3"
}
# members (names, sorted, "?" for one not started) that member $1 lists
members_at() { it_member_names "$(ep "$1")"; }
# every live member lists the members $1
all_list() {
	local i
	for i in "${live[@]}"; do [[ $(members_at "$i") == "$1" ]] || return 1; done
}
leader_index() { it_cl_leader "${live[@]}"; }
live_eps() { local i s=""; for i in "${live[@]}"; do s+="${s:+ }$(ep "$i")"; done; echo "$s"; }

for i in 0 1 2; do it_cl_start "$i" cetcd --initial-cluster-state new; done
live=(0 1 2)
for i in 0 1 2; do
	it_member_answers "${IT_CL_CPORT[i]}" "${logs[i]}" "member ${names[i]} answers" || exit 1
done
cid=$(ids_of 0 | cut -d' ' -f2)

# writers through the three first members
declare -a acks wpids
for i in 0 1 2; do
	acks[i]=$IT_TMP/acks.$i
	it_kv_start "$IT_TMP/writer.$i.out" write -endpoint "$(ep "$i")" -prefix "kv/m$i" \
		-acks "${acks[i]}" -writers 2 -per-conn 1
	wpids[i]=$IT_KV_PID
	check "writes through ${names[i]} are acknowledged" it_wait_lines "${acks[i]}" 20 30
done
all_acks() { cat "${acks[@]}" 2>/dev/null | wc -l; }
more_acks() { (($(all_acks) >= $1)); }
flowing() { local at; at=$(all_acks); it_until 30000 more_acks $((at + 20)); }

# ---- a 4th member joins
out=$(ctl --endpoints "$(ep 1)" member add "${names[3]}" --peer-urls "$(purl 3)" 2>&1)
check "member add ${names[3]} is accepted" grep -q "Member .* added to cluster" <<<"$out"
added=$(sed -nE 's/^Member +([0-9a-f]+) added to cluster.*/\1/p' <<<"$out")
initial3=$(sed -nE 's/^ETCD_INITIAL_CLUSTER="(.*)"$/\1/p' <<<"$out")
echo "  added ${names[3]} as $added; ETCD_INITIAL_CLUSTER=$initial3"
it_cl_join 3 cetcd "$initial3"
check "${names[3]} joins and answers" it_wait_healthy "${IT_CL_CPORT[3]}" 60
check "${names[3]} logs the id the cluster gave it" \
	it_wait_log "${logs[3]}" "\"msg\":\"joining the running cluster\",\"local-member-id\":\"$added\"" 5
read -r mid3 cid3 < <(ids_of 3)
check "${names[3]} serves with the added id $added and the cluster's id" \
	test "$(printf '%x' "$mid3")/$cid3" = "$added/$cid"
check "${names[3]} published itself" \
	it_wait_log "${logs[3]}" '"msg":"published local member to cluster through raft"' 20
live=(0 1 2 3)
check "every member lists four started members" \
	it_until 10000 all_list j0,j1,j2,j3
check "writes go on with four members" flowing
rev_of() { it_revision "$(ep "$1")"; }
rev_at_least() { local r; r=$(rev_of "$1") && ((r >= $2)); }
r0=$(rev_of 0)
check "${names[3]} caught up with the writes (revision $r0 and on)" it_until 30000 rev_at_least 3 "$r0"

# a writer through the joined member too
acks[3]=$IT_TMP/acks.3
it_kv_start "$IT_TMP/writer.3.out" write -endpoint "$(ep 3)" -prefix "kv/m3" -acks "${acks[3]}" \
	-writers 2 -per-conn 1
wpids[3]=$IT_KV_PID
check "writes through ${names[3]} are acknowledged" it_wait_lines "${acks[3]}" 20 30

# ---- a learner: promoting it through a follower is forwarded to the leader
li=$(it_until 10000 leader_index >/dev/null && leader_index)
fi_=$(( (li + 1) % 4 ))
out=$(ctl --endpoints "$(ep 0)" member add "${names[4]}" --learner --peer-urls "$(purl 4)" 2>&1)
check "member add --learner ${names[4]} is accepted" grep -q "Member .* added to cluster" <<<"$out"
lid=$(sed -nE 's/^Member +([0-9a-f]+) added to cluster.*/\1/p' <<<"$out")
initial4=$(sed -nE 's/^ETCD_INITIAL_CLUSTER="(.*)"$/\1/p' <<<"$out")
out=$(ctl --endpoints "$(ep "$fi_")" member promote "$lid" 2>&1 || true)
echo "  promote through follower ${names[fi_]} before the learner started: $out"
check "promoting a learner that has not caught up, through a follower: etcd's refusal from the leader" \
	grep -q "etcdserver: can only promote a learner member which is in sync with leader" <<<"$out"
check "the follower forwarded it to the leader over the peer port" \
	grep -q '"msg":"failed to promote a member"' "${logs[li]}"
it_cl_join 4 cetcd "$initial4"
check "the learner ${names[4]} joins and answers" it_wait_healthy "${IT_CL_CPORT[4]}" 60
read -r mid4 _ < <(ids_of 4)
check "${names[4]} serves with the added id $lid" test "$(printf '%x' "$mid4")" = "$lid"
r0=$(rev_of 0)
check "the learner caught up with the writes" it_until 30000 rev_at_least 4 "$r0"
# Status.isLearner, from the member's own configuration
status_learner() {
	ctl --endpoints "$(ep "$1")" endpoint status -w json |
		python3 -c 'import json,sys; print(str(json.load(sys.stdin)[0]["Status"].get("isLearner", False)).lower())'
}
check "${names[4]}'s Status says isLearner" test "$(status_learner 4)" = true
check "a voter's Status does not" test "$(status_learner 0)" = false
readyz() { curl -s -w ' %{http_code}' "http://127.0.0.1:${IT_CL_CPORT[$1]}/readyz$2"; }
check "the learner's /readyz/non_learner is 503: not supported for learner" \
	test "$(readyz 4 /non_learner)" = "$(printf '[-]non_learner failed: not supported for learner\n\n 503')"
check "a voter's /readyz/non_learner is ok" test "$(readyz 0 /non_learner)" = "ok
 200"
li=$(it_until 10000 leader_index >/dev/null && leader_index)
fi_=$(( (li + 1) % 4 ))
promoted() {
	ctl --endpoints "$(ep "$fi_")" member promote "$lid" >"$IT_TMP/promote.out" 2>&1
}
check "promoting it through follower ${names[fi_]} is accepted once it caught up" it_until 20000 promoted
sed 's/^/    /' "$IT_TMP/promote.out"
learner_of() {
	ctl --endpoints "$(ep "$1")" member list -w json |
		python3 -c 'import json,sys
for m in json.load(sys.stdin)["members"]:
    if "%x" % m["ID"] == sys.argv[1]: print(str(m.get("isLearner", False)).lower())' "$lid"
}
is_voter() { [[ $(learner_of "$1") == false ]]; }
for i in 0 1 2 3 4; do
	check "${names[i]} lists ${names[4]} as a voter" it_until 10000 is_voter "$i"
done
not_learner() { [[ $(status_learner 4) == false ]]; }
check "${names[4]}'s Status no longer says isLearner once promoted" it_until 10000 not_learner
# the leader's other refusals, relayed through the follower as etcd maps them
li=$(it_until 10000 leader_index >/dev/null && leader_index)
fi_=$(( (li + 1) % 4 ))
out=$(ctl --endpoints "$(ep "$fi_")" member promote "$lid" 2>&1 || true)
check "promoting a voter through follower ${names[fi_]}: etcd's 'can only promote a learner member'" \
	grep -qE "Error: etcdserver: can only promote a learner member$" <<<"$out"
out=$(ctl --endpoints "$(ep "$fi_")" member promote 1234abcd 2>&1 || true)
check "promoting an unknown id through follower ${names[fi_]}: etcd's 'member not found'" \
	grep -q "Error: etcdserver: member not found" <<<"$out"
live=(0 1 2 3 4)
acks[4]=$IT_TMP/acks.4
it_kv_start "$IT_TMP/writer.4.out" write -endpoint "$(ep 4)" -prefix "kv/m4" -acks "${acks[4]}" \
	-writers 2 -per-conn 1
wpids[4]=$IT_KV_PID
check "writes through ${names[4]} are acknowledged" it_wait_lines "${acks[4]}" 20 30

# ---- a member removed under load (the writer through it stops first)
victim=1
check "the writer through ${names[victim]} saw no violation" \
	it_kv_stop "${wpids[victim]}" "$IT_TMP/writer.$victim.out"
vid=$(printf '%x' "$(ids_of "$victim" | cut -d' ' -f1)")
out=$(ctl --endpoints "$(ep 3)" member remove "$vid" 2>&1)
check "member remove ${names[victim]} ($vid) through the joined member" grep -q "removed from cluster" <<<"$out"
check "the removed member stops (launcher exits)" it_wait_gone "${IT_CL_PIDS[victim]}" 20000
live=(0 2 3 4)
check "writes go on after the removal" flowing
check "every member lists the four others" \
	it_until 10000 all_list j0,j2,j3,j4

# ---- the joined member restarted keeps its ids
check "the writer through ${names[3]} saw no violation" it_kv_stop "${wpids[3]}" "$IT_TMP/writer.3.out"
it_cl_stop 3
it_cl_join 3 cetcd "$initial3"
check "${names[3]} restarts" it_wait_healthy "${IT_CL_CPORT[3]}" 60
read -r mid3b cid3b < <(ids_of 3)
check "${names[3]} restarted with the same member and cluster id" \
	test "$(printf '%x' "$mid3b")/$cid3b" = "$added/$cid"
check "${names[3]} logs a restart, not a join" \
	it_wait_log "${logs[3]}" "\"msg\":\"restarting local member\",\"local-member-id\":\"$added\"" 5
check "writes go on after the restart" flowing
# its stored and gatewayd restarted alone take the ids raftd published
# (check's own variable is "what": the loop's is "daemon")
for daemon in stored gatewayd-0; do
	dpid=$(IT_CETCD_PID=${IT_CL_PIDS[3]} it_cetcd_child "$daemon")
	kill -9 "$dpid"
	check "${names[3]}'s $daemon SIGKILLed: the launcher starts it again" \
		eval 'IT_CETCD_PID=${IT_CL_PIDS[3]} it_wait_child "$daemon" "$dpid" 30 >/dev/null'
	check "${names[3]} answers after its $daemon restarted" it_wait_healthy "${IT_CL_CPORT[3]}" 30
	read -r mid3c cid3c < <(ids_of 3)
	check "${names[3]}'s new $daemon serves with the joined ids" \
		test "$(printf '%x' "$mid3c")/$cid3c" = "$added/$cid"
done
check "${names[3]}'s stored applies again: a put through it is read back" \
	eval 'ctl --endpoints "$(ep 3)" put after-restarts yes >/dev/null && test "$(ctl --endpoints "$(ep 0)" get after-restarts --print-value-only)" = yes'

# ---- joining without being added: etcd's refusal
bad="${initial3},${names[5]}=$(purl 5)"
it_cl_join 5 cetcd "$bad"
check "a member the cluster did not add is refused and stops" it_wait_gone "${IT_CL_PIDS[5]}" 30000
check "with etcd's error" it_wait_log "${logs[5]}" '"msg":"discovery failed".*member count is unequal' 5

# ---- the end: nothing lost, all equal
for i in 0 2 4; do
	check "the writer through ${names[i]} saw no violation" it_kv_stop "${wpids[i]}" "$IT_TMP/writer.$i.out"
done
n=$(all_acks)
files=$(IFS=,; echo "${acks[*]}")
echo "  $n puts acknowledged"
for i in "${live[@]}"; do
	check "all $n acknowledged puts are there through ${names[i]}" it_acked_at "$(ep "$i")" kv "$files" "$n"
done
check "all members report the same revision and raft index" it_agreed 15000 it_same_state $(live_eps)
check "all members report the same HashKV" it_agreed 15000 it_same_hashkv $(live_eps)

# ---- raftd's view of the members on the joined member: its peer port's
# /members lists the same ids as the cluster service
peer_ids() { curl -s --max-time 5 "$(purl "$1")/members" | python3 -c 'import json,sys; print(" ".join(sorted("%x" % m["id"] for m in json.load(sys.stdin))))'; }
list_ids() { ctl --endpoints "$(ep "$1")" member list -w json | python3 -c 'import json,sys; print(" ".join(sorted("%x" % m["ID"] for m in json.load(sys.stdin)["members"])))'; }
# member $1's raftd lists the ids member 0 lists, and some
same_ids() { local p; p=$(peer_ids "$1" 2>/dev/null) && [[ -n $p && $p == "$(list_ids 0)" ]]; }
check "${names[3]}'s raftd (GET /members) knows the members the cluster lists" same_ids 3
check "so does ${names[4]}'s (the promoted learner)" same_ids 4

# ---- joining over https peer URLs (--peer-auto-tls on both sides)
read -r -a tp < <(it_free_ports 4)
tls_start() {
	local i=$1 state=$2 initial=$3 rt="$IT_RT/t$1"
	mkdir -p "$rt"
	chmod 700 "$rt"
	"$IT_BIN/cetcd" --name "t$i" --data-dir "$IT_TMP/t$i" --runtime-dir "$rt" \
		--listen-client-urls "http://127.0.0.1:${tp[2 * i]}" \
		--advertise-client-urls "http://127.0.0.1:${tp[2 * i]}" \
		--listen-peer-urls "https://127.0.0.1:${tp[2 * i + 1]}" \
		--initial-advertise-peer-urls "https://127.0.0.1:${tp[2 * i + 1]}" \
		--initial-cluster "$initial" --initial-cluster-state "$state" --peer-auto-tls \
		2>>"$IT_TMP/t$i.log" &
	it_track "$!"
}
tls_start 0 new "t0=https://127.0.0.1:${tp[1]}"
it_member_answers "${tp[0]}" "$IT_TMP/t0.log" "a member with https peer URLs answers" || exit 1
ctl --endpoints "127.0.0.1:${tp[0]}" put tls-key before-join >/dev/null
out=$(ctl --endpoints "127.0.0.1:${tp[0]}" member add t1 --peer-urls "https://127.0.0.1:${tp[3]}" 2>&1)
tinit=$(sed -nE 's/^ETCD_INITIAL_CLUSTER="(.*)"$/\1/p' <<<"$out")
tls_start 1 existing "$tinit"
it_member_answers "${tp[2]}" "$IT_TMP/t1.log" "a member joins over https (/members fetched with the peer TLS client)" ||
	exit 1
check "it logged the join" it_wait_log "$IT_TMP/t1.log" '"msg":"joining the running cluster"' 5
check "it has what was written before it joined" \
	test "$(ctl --endpoints "127.0.0.1:${tp[2]}" get tls-key --print-value-only)" = before-join
it_summary
