#!/usr/bin/env bash
# --force-new-cluster, as etcd 3.4's: a 3-member cetcd cluster takes
# writes and stops; one member restarted alone with --force-new-cluster
# leads a cluster of one (its member list names only itself, the removed
# members are in the members_removed bucket as etcd keeps them), serves
# every key the cluster acknowledged, takes writes, and keeps being a
# one-member cluster when restarted without the flag. Debian's etcd 3.4,
# given a copy of another member's data dir with the same flag, ends in
# the same state, and starts on the data dir cetcd forced (when etcd is
# installed). f0 keeps its WAL in a --wal-dir of its own throughout: the
# forced restart rewrites it there, and f0's data dir never gets a
# member/wal. Exits 77 when the programs,
# etcdctl or python3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init force_new_cluster
it_build_go_tool boltcheck go.etcd.io/bbolt

it_cl_init force-test 3 f
names=("${IT_CL_NAMES[@]}")
ep() { it_cl_ep "$1"; }
ctl() { ETCDCTL_API=3 etcdctl --command-timeout 10s "$@"; }
member_names() { it_member_names "$(ep "$1")"; }
rev_of() { it_revision "$(ep "$1")"; }
w0=(--wal-dir "$IT_TMP/f0-wal")
# f0's WAL is whole in its --wal-dir, and not in its data dir
f0_wal_apart() {
	test ! -e "$IT_TMP/f0/member/wal" &&
		ls "$IT_TMP/f0-wal" | grep -q '^[0-9a-f]\{16\}-[0-9a-f]\{16\}\.wal$'
}
it_cl_start 0 cetcd "${w0[@]}"
for i in 1 2; do it_cl_start "$i" cetcd; done
for i in 0 1 2; do it_cl_answers "$i" "${names[i]} answers" || exit 1; done
ok "three members answer"
for k in $(seq 1 50); do ctl --endpoints "$(ep $((k % 3)))" put "key/$k" "v$k" >/dev/null; done
keys_at() { ctl --endpoints "$(ep "$1")" get key/ --prefix --keys-only | grep -c '^key/' || true; }
check "50 puts acknowledged through the three members" test "$(keys_at 0)" = 50
check "all members at the same revision" it_until 10000 it_same_state "$(ep 0)" "$(ep 1)" "$(ep 2)"
rev=$(rev_of 0)
member_id0() { head -n 1 <<<"$ids"; }
ids=$(for i in 0 1 2; do it_member_id "$(ep "$i")"; done)
for i in 0 1 2; do it_cl_stop "$i"; done
cp -a "$IT_TMP/f2" "$IT_TMP/f2.copy"

check "f0's WAL is in its --wal-dir" f0_wal_apart
it_cl_start 0 cetcd --force-new-cluster "${w0[@]}"
check "f0 restarted with --force-new-cluster answers" it_wait_healthy "${IT_CL_CPORT[0]}" 60
check "it logs etcd's line" it_wait_log "$IT_TMP/f0.log" '"msg":"forcing restart member"' 10
check "it leads" it_until 10000 it_leads "$(ep 0)"
check "its member list names only itself" test "$(member_names 0)" = f0
got=$(keys_at 0)
check "all 50 keys are there ($got)" test "$got" = 50
check "a put is acknowledged" ctl --endpoints "$(ep 0)" put after force
check "the revision went on from $rev" test "$(rev_of 0)" -gt "$rev"
it_cl_stop 0
check "after the force, f0's WAL is still in its --wal-dir only" f0_wal_apart
removed=$("$IT_BUILD/tests/boltcheck" -text members_removed "$IT_TMP/f0/member/snap/db" | awk '{print $1}' | sort | tr '\n' ' ')
others=$(grep -v "^$(member_id0)\$" <<<"$ids" | sort | tr '\n' ' ')
# (two ids each side: an empty bucket and an empty list are not the same)
check "the db's members_removed bucket holds the other two members ($removed)" \
	test "$removed" = "$others" -a "$(wc -w <<<"$others")" = 2
it_cl_start 0 cetcd "${w0[@]}"
check "restarted without the flag, it answers" it_wait_healthy "${IT_CL_CPORT[0]}" 60
check "still a cluster of one" test "$(member_names 0)" = f0
check "still leading" it_until 10000 it_leads "$(ep 0)"
check "the put made after the force is there" test "$(ctl --endpoints "$(ep 0)" get after --print-value-only)" = force
it_cl_stop 0

if command -v etcd >/dev/null; then
	rm -rf "$IT_TMP/f2"
	mv "$IT_TMP/f2.copy" "$IT_TMP/f2"
	it_cl_start 2 etcd --force-new-cluster
	check "etcd on f2's data dir (written by cetcd) with --force-new-cluster answers" \
		it_wait_healthy "${IT_CL_CPORT[2]}" 60
	check "etcd's member list names only f2" test "$(member_names 2)" = f2
	got=$(keys_at 2)
	check "etcd serves all 50 keys ($got)" test "$got" = 50
	it_cl_stop 2
	it_cl_start 0 etcd "${w0[@]}"
	check "etcd starts on f0's data dir, which cetcd forced" it_wait_healthy "${IT_CL_CPORT[0]}" 60
	check "etcd sees the cluster of one cetcd made" test "$(member_names 0)" = f0
	check "and the put made after the force" \
		test "$(ctl --endpoints "$(ep 0)" get after --print-value-only)" = force
	it_cl_stop 0
else
	echo "  etcd is not installed: the comparison with etcd is skipped"
fi
echo "  member ids: $(tr '\n' ' ' <<<"$ids")"
it_summary
