#!/usr/bin/env bash
# A write sent while the member knows no leader waits for one, as in etcd
# 3.4 (raftd holds it: raftd/proposals.h), on a 3-member cetcd cluster:
#   - two members paused (SIGSTOP), a put through the third waits; one of
#     them resumed a few seconds later, the put succeeds (it is not
#     refused "etcdserver: no leader" at once);
#   - with both kept paused past the request timeout (5 s + 2 elections),
#     the put fails with etcd's "etcdserver: request timed out".
# Exits 77 when the programs or etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init noleader_write

ELECTION_MS=1000
it_cl_init noleader-test 3 n
for i in 0 1 2; do it_cl_start "$i" cetcd --election-timeout "$ELECTION_MS"; done
for i in 0 1 2; do it_cl_answers "$i" || exit 1; done
ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s "$@" 2>&1 | grep -v '^{"level"' || true; }
leads_among() { it_cl_leader "$@" >/dev/null; }
check "one member leads" it_until 10000 leads_among 0 1 2
check "a first put" test "$(ctl --endpoints "$(it_cl_ep 0)" put k0 v0)" = OK

# the survivor knows no leader: its status says leader 0 (or it cannot say)
no_leader_at() {
	local out
	out=$(ETCDCTL_API=3 etcdctl --endpoints "$(it_cl_ep "$1")" --command-timeout 1s \
		endpoint status -w fields 2>/dev/null)
	! grep -qE '"Leader" : [1-9]' <<<"$out"
}

# signal SIG to members I... (each process it runs; one that has just
# ended is no error)
sig() {
	local g=$1 i
	shift
	for i in "$@"; do kill "-$g" $(it_cl_procs "$i") 2>/dev/null || true; done
}

s=0
sig STOP 1 2
check "the survivor loses its leader" it_until 10000 no_leader_at "$s"
t0=$(it_now_ms)
{
	ctl --endpoints "$(it_cl_ep "$s")" --command-timeout 20s put held v1 >"$IT_TMP/put1.out"
	it_now_ms >"$IT_TMP/put1.end"
} &
put=$!
sleep 3
sig CONT 1
wait "$put"
took=$(($(cat "$IT_TMP/put1.end") - t0))
echo "  the put through the survivor answered after $took ms: $(cat "$IT_TMP/put1.out")"
check "a put with no leader waits for one and succeeds" test "$(cat "$IT_TMP/put1.out")" = OK
check "it waited for the resumed member (no refusal at once)" test "$took" -ge 2500
check "the held put is read back" \
	test "$(ctl --endpoints "$(it_cl_ep 1)" --command-timeout 10s get held --print-value-only)" = v1
sig CONT 2
check "member 2 answers again" it_wait_healthy "$(it_cl_ep 2)" 30

sig STOP 1 2
check "the survivor loses its leader again" it_until 10000 no_leader_at "$s"
t0=$(it_now_ms)
out=$(ctl --endpoints "$(it_cl_ep "$s")" --command-timeout 15s put lost v2)
took=$(($(it_now_ms) - t0))
echo "  with no leader for good, after $took ms: $out"
check "past the request timeout: etcd's timeout text" grep -q "etcdserver: request timed out" <<<"$out"
check "not before the request timeout (7 s)" test "$took" -ge 6500
sig CONT 1 2
for i in 1 2; do check "member $i answers again" it_wait_healthy "$(it_cl_ep "$i")" 30; done
check "a leader again" it_until 10000 leads_among 0 1 2
check "a put after the resume" test "$(ctl --endpoints "$(it_cl_ep "$s")" --command-timeout 10s put k1 v1)" = OK

it_summary
