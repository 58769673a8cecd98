#!/usr/bin/env bash
# etcd's v3lock and v3election gRPC services on a real single-member
# cetcd, driven by tests/tools/lockclient (etcd 3.4's client stubs): two
# clients contend for one lock and get it in order, Unlock hands it over,
# a holder whose lease expires loses it, a cancelled waiter leaves no key
# behind, Lock and Campaign answer the key (and name) whole for names of
# every length up to 200 bytes; Campaign, Proclaim, Leader, Observe and Resign with two
# candidates, Observe seeing every leader and value in order. The same
# script runs against Debian's etcd 3.4, and the two transcripts must be
# the same line for line; then once more through a follower of a
# 3-member cetcd cluster.
# Exits 77 when Go, etcd's client packages or etcd are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcd
it_init lock
it_build_go_tool lockclient go.etcd.io/etcd/clientv3
LC=$IT_BUILD/tests/lockclient

it_cetcd_start t1 "$IT_TMP/data" "$IT_TMP/cetcd.log" --gateways 2
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
it_etcd_start e1 "$IT_TMP/etcd" "$IT_TMP/etcd.log"
check "etcd answers" it_wait_healthy "$IT_ETCD_PORT" 30

# (lockclient waits as long as a member it cannot reach: timeout ends it)
rc=0
timeout 300 "$LC" -endpoint "127.0.0.1:$IT_CPORT" >"$IT_TMP/cetcd.out" 2>"$IT_TMP/cetcd.err" || rc=$?
sed 's/^/  cetcd| /' "$IT_TMP/cetcd.out"
check "every fact holds on cetcd" test "$rc" = 0
rc=0
timeout 300 "$LC" -endpoint "127.0.0.1:$IT_ETCD_PORT" >"$IT_TMP/etcd.out" 2>"$IT_TMP/etcd.err" || rc=$?
check "every fact holds on etcd 3.4 (the script's own check)" test "$rc" = 0

# Where cetcd answers differently on purpose: etcd 3.4 tells a Lock whose
# own key went away while it waited that it holds the lock; cetcd answers
# etcd's "mutex: session is expired" (not reached by this script).
if diff "$IT_TMP/etcd.out" "$IT_TMP/cetcd.out" >"$IT_TMP/diff"; then
	ok "the same transcript as etcd 3.4"
else
	fail "the same transcript as etcd 3.4"
	sed 's/^/  /' "$IT_TMP/diff"
fi

# The same through a follower of a 3-member cetcd cluster: Lock, Campaign
# and the rest are proposals forwarded to the leader, the sessions' lease
# keepalives and expiry go through the follower's lease forwarding.
it_cl_init lockc 3 f
for i in 0 1 2; do it_cl_start "$i" cetcd --gateways 2; done
for i in 0 1 2; do it_cl_answers "$i" || { it_summary; exit 1; }; done
lead=$(it_cl_current_leader)
fol=$(it_cl_other "$lead")
rc=0
timeout 300 "$LC" -endpoint "$(it_cl_ep "$fol")" >"$IT_TMP/follower.out" 2>"$IT_TMP/follower.err" || rc=$?
sed 's/^/  follower| /' "$IT_TMP/follower.out"
check "every fact holds through a follower (${IT_CL_NAMES[fol]}) of a 3-member cetcd cluster" test "$rc" = 0
if diff "$IT_TMP/etcd.out" "$IT_TMP/follower.out" >"$IT_TMP/diff.follower"; then
	ok "through a follower: the same transcript as etcd 3.4"
else
	fail "through a follower: the same transcript as etcd 3.4"
	sed 's/^/  /' "$IT_TMP/diff.follower"
	tail -n 20 "$IT_TMP/follower.err"
fi
it_cl_stop 0 1 2
it_summary
