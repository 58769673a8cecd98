#!/usr/bin/env bash
# Users, roles and auth in snapshots that move between etcd and cetcd:
#   - `etcdctl snapshot save` from Debian's etcd 3.4 with users, roles and
#     auth enabled, restored with `etcdctl snapshot restore` and started
#     as a cetcd member: the users log in with their passwords and the
#     permissions hold as they did on etcd (the same answers);
#   - the reverse: a snapshot of that cetcd member, restored and started
#     by etcd 3.4, answers the same again;
#   - cetcd's snapshot restored as a cluster of one etcd and two cetcd
#     members: each member answers the same again, all with one HashKV;
#   - etcd's snapshot restored as one cetcd member, which an etcd 3.4
#     member joins (taking the users and roles in the leader's raft
#     snapshot): both answer the same again.
# Exits 77 when the programs, Debian's etcd or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_init authsnapmixed

ctl() {
	local port=$1
	shift
	etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "127.0.0.1:$port" "$@" \
		</dev/null 2>&1 | grep -v '^{"level"' || true
}
R=(--user root:rootpw)

# what alice, bob and nobody get from the member at PORT
answers() {
	local port=$1
	echo "> alice get a/1"; ctl "$port" --user alice:alicepw get a/1
	echo "> alice get b/1"; ctl "$port" --user alice:alicepw get b/1
	echo "> alice put a/2"; ctl "$port" --user alice:alicepw put a/2 x
	echo "> alice put b/2"; ctl "$port" --user alice:alicepw put b/2 x
	echo "> alice user list"; ctl "$port" --user alice:alicepw user list
	echo "> alice role get r"; ctl "$port" --user alice:alicepw role get r
	echo "> bob get b/1"; ctl "$port" --user bob:bobpw get b/1
	echo "> bob get a/1"; ctl "$port" --user bob:bobpw get a/1
	echo "> bob with alice's password"; ctl "$port" --user bob:alicepw get b/1
	echo "> no user"; ctl "$port" get a/1
	echo "> root user list"; ctl "$port" "${R[@]}" user list
	echo "> root role list"; ctl "$port" "${R[@]}" role list
	echo "> root user get alice"; ctl "$port" "${R[@]}" user get alice
	echo "> root role get r"; ctl "$port" "${R[@]}" role get r
	echo "> root role get s"; ctl "$port" "${R[@]}" role get s
	echo "> root auth status"; ctl "$port" "${R[@]}" auth status
}
# same_answers WHO BEFORE AFTER: WHO's answers (AFTER) are BEFORE's
same_answers() {
	if diff -u "$2" "$3"; then
		ok "$1 answers the $(grep -c '^>' "$3") requests as before"
	else
		fail "$1 answers the requests as before"
	fi
}

it_etcd_start e1 "$IT_TMP/e1" "$IT_TMP/e1.log" "" --auth-token simple
check "etcd starts" it_wait_healthy "$IT_ETCD_PORT" 30
E=$IT_ETCD_PORT
for c in "user add root:rootpw" "user add alice:alicepw" "user add bob:bobpw" "role add r" \
	"role add s" "role grant-permission --prefix r readwrite a/" "role grant-permission s read b/" \
	"role grant-permission r read b/1" "user grant-role alice r" "user grant-role bob s" \
	"put a/1 va" "put b/1 vb"; do
	# shellcheck disable=SC2086
	ctl "$E" $c >/dev/null
done
check "auth enabled on etcd" grep -q "Authentication Enabled" <(ctl "$E" auth enable)
IT_AUTH=root:rootpw # it_wait_healthy's get from here on
answers "$E" >"$IT_TMP/etcd.out"
check "alice reads a/1 on etcd" grep -qx va "$IT_TMP/etcd.out"
check "bob is refused a/1" grep -q "permission denied" "$IT_TMP/etcd.out"
check "etcd saves a snapshot" grep -q "Snapshot saved" \
	<(ctl "$E" "${R[@]}" snapshot save "$IT_TMP/etcd.db")
kill -TERM "$IT_ETCD_PID"
it_wait_gone "$IT_ETCD_PID" 10000 || true

# etcd's snapshot, run by cetcd
read -r IT_CPORT IT_PPORT < <(it_free_ports 2)
check "etcdctl restores etcd's snapshot for a cetcd member" \
	etcdctl snapshot restore "$IT_TMP/etcd.db" --name c1 --data-dir "$IT_TMP/c1" \
	--initial-cluster "c1=http://127.0.0.1:$IT_PPORT" \
	--initial-advertise-peer-urls "http://127.0.0.1:$IT_PPORT"
it_cetcd_start c1 "$IT_TMP/c1" "$IT_TMP/c1.log" --bcrypt-cost 6
check "cetcd starts on it" it_wait_healthy "$IT_CPORT" 30
answers "$IT_CPORT" >"$IT_TMP/cetcd.out"
same_answers "cetcd on etcd's snapshot" "$IT_TMP/etcd.out" "$IT_TMP/cetcd.out"
check "cetcd saves a snapshot" grep -q "Snapshot saved" \
	<(ctl "$IT_CPORT" "${R[@]}" snapshot save "$IT_TMP/cetcd.db")
it_cetcd_stop

# and cetcd's, run by etcd (the puts above made the same changes again)
it_etcd_start e2 "$IT_TMP/e2" "$IT_TMP/e2.log" "$IT_TMP/cetcd.db" --auth-token simple
check "etcd starts on cetcd's snapshot" it_wait_healthy "$IT_ETCD_PORT" 30
answers "$IT_ETCD_PORT" >"$IT_TMP/etcd2.out"
same_answers "etcd on cetcd's snapshot" "$IT_TMP/cetcd.out" "$IT_TMP/etcd2.out"
kill -TERM "$IT_ETCD_PID"
it_wait_gone "$IT_ETCD_PID" 10000 || true

# restore SNAPSHOT I: member I's data dir from SNAPSHOT, for the members
# of IT_CL_INITIAL
restore() {
	etcdctl snapshot restore "$1" --name "${IT_CL_NAMES[$2]}" --data-dir "$IT_TMP/${IT_CL_NAMES[$2]}" \
		--initial-cluster "$IT_CL_INITIAL" --initial-cluster-token "$IT_CL_TOKEN" \
		--initial-advertise-peer-urls "$(it_cl_purl "$2")" >"$IT_TMP/restore.${IT_CL_NAMES[$2]}" 2>&1
}
# every_member_answers WHAT I...: members I... answer as cetcd did first,
# and the same HashKV
every_member_answers() {
	local what=$1 i eps=()
	shift
	for i in "$@"; do
		answers "${IT_CL_CPORT[i]}" >"$IT_TMP/${IT_CL_NAMES[i]}.out"
		same_answers "${IT_CL_NAMES[i]} (${kinds[i]}) $what" "$IT_TMP/cetcd.out" "$IT_TMP/${IT_CL_NAMES[i]}.out"
		eps+=("$(it_cl_ep "$i")")
	done
	if it_agreed 10000 it_same_hashkv "${eps[@]}"; then ok "$what: the same HashKV on every member"; else
		fail "$what: the same HashKV on every member"; fi
}

# cetcd's snapshot restored as a cluster of one etcd and two cetcd members
it_cl_init authsnapcl 3 r
kinds=(etcd cetcd cetcd)
for i in 0 1 2; do
	check "etcdctl restores cetcd's snapshot for r$i (${kinds[i]})" restore "$IT_TMP/cetcd.db" "$i"
done
for i in 0 1 2; do it_cl_start "$i" "${kinds[i]}" --bcrypt-cost 6 --auth-token simple; done
for i in 0 1 2; do it_cl_answers "$i" "r$i (${kinds[i]}) answers on the snapshot" || { it_summary; exit 1; }; done
every_member_answers "in a cluster restored from cetcd's snapshot" 0 1 2
it_cl_stop 0 1 2

# etcd's snapshot restored as a cetcd member alone, which an etcd member
# joins (it gets the users and roles in the leader's raft snapshot)
it_cl_init authsnapjoin 2 j
kinds=(cetcd etcd)
IT_CL_INITIAL=$(it_cl_initial 0)
check "etcdctl restores etcd's snapshot for j0 (cetcd)" restore "$IT_TMP/etcd.db" 0
it_cl_start 0 cetcd --bcrypt-cost 6
it_cl_answers 0 "j0 (cetcd) answers on the snapshot" || { it_summary; exit 1; }
check "j1 (etcd) added through cetcd" grep -q "added to cluster" \
	<(it_cl_ctl 0 "${R[@]}" member add j1 --peer-urls "$(it_cl_purl 1)")
it_cl_join 1 etcd "$(it_cl_initial 0 1)" --auth-token simple
it_cl_answers 1 "j1 (etcd) joins and answers" || { it_summary; exit 1; }
check "j1 (etcd) took the db in cetcd's raft snapshot" \
	grep -q "successfully received and saved database snapshot" "$(it_cl_log 1)"
every_member_answers "in a cluster restored from etcd's snapshot and joined" 0 1
it_cl_stop 0 1
it_summary
