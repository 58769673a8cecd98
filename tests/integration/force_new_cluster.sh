#!/usr/bin/env bash
# --force-new-cluster, as etcd 3.4's: a 3-member cetcd cluster takes
# writes and stops; one member restarted alone with --force-new-cluster
# leads a cluster of one (its member list names only itself, the removed
# members are in the members_removed bucket as etcd keeps them), serves
# every key the cluster acknowledged, takes writes, and keeps being a
# one-member cluster when restarted without the flag. Debian's etcd 3.4,
# given a copy of another member's data dir with the same flag, ends in
# the same state, and starts on the data dir cetcd forced (when etcd is
# installed). Exits 77 when the programs,
# etcdctl or python3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init force_new_cluster
it_build_go_tool boltcheck go.etcd.io/bbolt

read -r -a ports < <(it_free_ports 6)
names=(f0 f1 f2)
initial=""
for i in 0 1 2; do
	initial+="${initial:+,}${names[i]}=http://127.0.0.1:${ports[2 * i + 1]}"
done
declare -a pids
# start I BIN [FLAG...]: member I on its data dir, by cetcd or etcd
start() {
	local i=$1 bin=$2 rt="$IT_RT/${names[$1]}" extra=()
	shift 2
	mkdir -p "$rt"
	chmod 700 "$rt"
	[[ $bin == "$IT_BIN/cetcd" ]] && extra=(--runtime-dir "$rt")
	"$bin" --name "${names[i]}" --data-dir "$IT_TMP/${names[i]}" "${extra[@]}" \
		--listen-client-urls "http://127.0.0.1:${ports[2 * i]}" \
		--advertise-client-urls "http://127.0.0.1:${ports[2 * i]}" \
		--listen-peer-urls "http://127.0.0.1:${ports[2 * i + 1]}" \
		--initial-advertise-peer-urls "http://127.0.0.1:${ports[2 * i + 1]}" \
		--initial-cluster "$initial" --initial-cluster-token force-test "$@" \
		2>>"$IT_TMP/${names[i]}.log" &
	pids[i]=$!
	it_track "${pids[i]}"
}
stop() {
	kill -TERM "${pids[$1]}" 2>/dev/null || true
	it_wait_gone "${pids[$1]}" 20000 || kill -9 "${pids[$1]}" 2>/dev/null || true
}
ep() { echo "127.0.0.1:${ports[2 * $1]}"; }
ctl() { ETCDCTL_API=3 etcdctl --command-timeout 10s "$@"; }
member_names() {
	ctl --endpoints "$(ep "$1")" member list -w json |
		python3 -c 'import json,sys; print(",".join(sorted(m.get("name","") for m in json.load(sys.stdin)["members"])))'
}
rev_of() {
	ctl --endpoints "$(ep "$1")" endpoint status -w json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])'
}
for i in 0 1 2; do start "$i" "$IT_BIN/cetcd"; done
for i in 0 1 2; do
	it_wait_healthy "${ports[2 * i]}" 60 || { fail "${names[i]} answers"; tail -20 "$IT_TMP/${names[i]}.log"; exit 1; }
done
ok "three members answer"
for k in $(seq 1 50); do ctl --endpoints "$(ep $((k % 3)))" put "key/$k" "v$k" >/dev/null; done
keys_at() { ctl --endpoints "$(ep "$1")" get key/ --prefix --keys-only | grep -c '^key/' || true; }
check "50 puts acknowledged through the three members" test "$(keys_at 0)" = 50
check "all members at the same revision" it_until 10000 it_same_state "$(ep 0)" "$(ep 1)" "$(ep 2)"
rev=$(rev_of 0)
member_id0() { head -n 1 <<<"$ids"; }
ids=$(for i in 0 1 2; do ctl --endpoints "$(ep "$i")" endpoint status -w json |
	python3 -c 'import json,sys; print("%x" % json.load(sys.stdin)[0]["Status"]["header"]["member_id"])'; done)
for i in 0 1 2; do stop "$i"; done
cp -a "$IT_TMP/f2" "$IT_TMP/f2.copy"

start 0 "$IT_BIN/cetcd" --force-new-cluster
check "f0 restarted with --force-new-cluster answers" it_wait_healthy "${ports[0]}" 60
check "it logs etcd's line" it_wait_log "$IT_TMP/f0.log" '"msg":"forcing restart member"' 10
check "it leads" it_until 10000 it_leads "$(ep 0)"
check "its member list names only itself" test "$(member_names 0)" = f0
got=$(keys_at 0)
check "all 50 keys are there ($got)" test "$got" = 50
check "a put is acknowledged" ctl --endpoints "$(ep 0)" put after force
check "the revision went on from $rev" test "$(rev_of 0)" -gt "$rev"
stop 0
removed=$("$IT_BUILD/tests/boltcheck" -text members_removed "$IT_TMP/f0/member/snap/db" | awk '{print $1}' | sort | tr '\n' ' ')
others=$(grep -v "^$(member_id0)\$" <<<"$ids" | sort | tr '\n' ' ')
check "the db's members_removed bucket holds the other two members ($removed)" \
	test "$removed" = "$others"
start 0 "$IT_BIN/cetcd"
check "restarted without the flag, it answers" it_wait_healthy "${ports[0]}" 60
check "still a cluster of one" test "$(member_names 0)" = f0
check "still leading" it_until 10000 it_leads "$(ep 0)"
check "the put made after the force is there" test "$(ctl --endpoints "$(ep 0)" get after --print-value-only)" = force
stop 0

if command -v etcd >/dev/null; then
	rm -rf "$IT_TMP/f2"
	mv "$IT_TMP/f2.copy" "$IT_TMP/f2"
	start 2 "$(command -v etcd)" --force-new-cluster
	check "etcd on f2's data dir (written by cetcd) with --force-new-cluster answers" \
		it_wait_healthy "${ports[4]}" 60
	check "etcd's member list names only f2" test "$(member_names 2)" = f2
	got=$(keys_at 2)
	check "etcd serves all 50 keys ($got)" test "$got" = 50
	stop 2
	start 0 "$(command -v etcd)"
	check "etcd starts on f0's data dir, which cetcd forced" it_wait_healthy "${ports[0]}" 60
	check "etcd sees the cluster of one cetcd made" test "$(member_names 0)" = f0
	check "and the put made after the force" \
		test "$(ctl --endpoints "$(ep 0)" get after --print-value-only)" = force
	stop 0
else
	echo "  etcd is not installed: the comparison with etcd is skipped"
fi
echo "  member ids: $(tr '\n' ' ' <<<"$ids")"
it_summary
