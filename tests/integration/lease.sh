#!/usr/bin/env bash
# Leases on a real single-member cetcd through etcdctl 3.4: grant (etcd's
# minimum TTL and its error for a TTL over the maximum), put with a lease
# and with a lease that does not exist, timetolive with keys, keep-alive,
# leases, revoke (its keys gone in one revision); expiry deletes the
# keys exactly once (one revision); the remaining TTL survives a restart
# of the member (from the checkpoints, --lease-checkpoint-interval 1s,
# not reset to the granted TTL); a lease and its keys survive SIGKILL of
# stored.
# Exits 77 when etcdctl 3.4 or the programs are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init lease

it_cetcd_start t1 "$IT_TMP/data" "$IT_TMP/cetcd.log" --gateways 2 --lease-checkpoint-interval 1s
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30

ctl() { ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$IT_CPORT" --command-timeout 5s "$@"; }
lease_of() { awk '/granted/ {print $2}' <<<"$1"; }
rev() { ctl endpoint status -w json | grep -o '"revision":[0-9]*' | head -1 | cut -d: -f2; }
# none_under PREFIX: a get of PREFIX answers, with no key (a member that
# does not answer has deleted nothing)
none_under() {
	local out
	out=$(ctl get --prefix "$1") && [[ -z $out ]]
}
# not_listed ID: lease list answers, without lease ID (etcdctl's lease
# list has no deadline of its own: timeout gives it one)
not_listed() {
	local out
	out=$(timeout 10 etcdctl --endpoints "127.0.0.1:$IT_CPORT" lease list) &&
		[[ $out == *"found "* && $out != *"$1"* ]]
}
ttl_of() { ctl lease timetolive "$1" | sed -n 's/.*remaining(\(-\?[0-9]*\)s).*/\1/p'; }

out=$(ctl lease grant 1)
check "a TTL below the minimum is raised to it (2 s)" grep -q "TTL(2s)" <<<"$out"
out=$(ctl lease grant 9000000001 2>&1 || true)
check "a TTL over the maximum: etcd's error" grep -q "etcdserver: too large lease TTL" <<<"$out"

L=$(lease_of "$(ctl lease grant 60)")
check "grant gives an id" test -n "$L"
check "put with the lease" ctl put --lease="$L" k1 v1
check "another put with the lease" ctl put --lease="$L" k2 v2
out=$(ctl put --lease=abcdef k3 v 2>&1 || true)
check "put with an unknown lease: etcd's error" grep -q "etcdserver: requested lease not found" <<<"$out"
out=$(ctl lease timetolive --keys "$L")
check "timetolive lists the keys" grep -q "granted with TTL(60s), remaining([0-9]*s), attached keys(\[k1 k2\])" <<<"$out"
out=$(ctl lease keep-alive --once "$L")
check "keep-alive renews to the TTL" grep -q "keepalived with TTL(60)" <<<"$out"
check "leases lists it" bash -c "ETCDCTL_API=3 etcdctl --endpoints 127.0.0.1:$IT_CPORT lease list | grep -q $L"
out=$(ctl lease timetolive 1234abcd)
check "timetolive of an unknown lease" grep -q "already expired" <<<"$out"
r0=$(rev)
check "revoke" ctl lease revoke "$L"
r1=$(rev)
check "revoke deleted both keys in one revision ($r0 -> $r1)" test "$r1" -eq $((r0 + 1))
check "the keys are gone" none_under k

# Expiry: the keys go exactly once, in one revision.
E=$(lease_of "$(ctl lease grant 2)")
ctl put --lease="$E" e1 v >/dev/null
ctl put --lease="$E" e2 v >/dev/null
r0=$(rev)
check "an expired lease's keys are deleted" it_until 10000 none_under e
sleep 4
r1=$(rev)
check "expiry deleted them in one revision, once ($r0 -> $r1)" test "$r1" -eq $((r0 + 1))
check "the expired lease is gone" not_listed "$E"

# Kept alive across the stream: still there after twice its TTL.
K=$(lease_of "$(ctl lease grant 2)")
ctl put --lease="$K" ka v >/dev/null
ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$IT_CPORT" lease keep-alive "$K" >"$IT_TMP/ka.out" 2>&1 &
KA=$!
it_track "$KA"
sleep 5
check "a kept-alive lease outlives its TTL" test "$(ctl get ka --print-value-only)" = v
check "the stream answered several times" test "$(grep -c "keepalived with TTL(2)" "$IT_TMP/ka.out")" -ge 3

# SIGKILL of stored: the launcher restarts it, the lease and its key stay.
old=$(it_cetcd_child stored)
kill -9 "$old"
if it_wait_child stored "$old" 30 >/dev/null; then ok "stored is restarted"; else fail "stored is restarted"; fi
check "cetcd answers again" it_wait_healthy "$IT_CPORT" 30
sleep 3
check "the kept-alive lease's key survives stored's SIGKILL" test "$(ctl get ka --print-value-only)" = v
kill "$KA" 2>/dev/null || true

# Restart: the remaining TTL comes from the checkpoints, not the grant.
R=$(lease_of "$(ctl lease grant 40)")
ctl put --lease="$R" r v >/dev/null
sleep 8
before=$(ttl_of "$R")
check "the member stops" it_cetcd_stop
it_cetcd_restart "$IT_TMP/cetcd.log"
check "cetcd answers after the restart" it_wait_healthy "$IT_CPORT" 30
after=$(ttl_of "$R")
check "the remaining TTL survived the restart ($before s before, $after s after, granted 40)" \
	test -n "$after" -a "${after:-99}" -le 34
check "the leased key survived the restart" test "$(ctl get r --print-value-only)" = v

((it_failures == 0)) || tail -30 "$IT_TMP/cetcd.log"
it_summary
