#!/usr/bin/env bash
# Readers and the gatewayd processes of one member (two of them, sharing
# the client port through SO_REUSEPORT), with etcd's Go client
# (tests/tools/kvclient); every value read is checked (values are a
# function of their key) and every acknowledged put is checked at the end.
#  1. Readers under faults: 16 reader connections read acknowledged keys,
#     ranges and counts, linearizable and serializable in turn, while two
#     writers put and stored is SIGKILLed three times: every read answers
#     right or fails with a clean gRPC status, and the header revision a
#     connection sees never goes backwards.
#  2. Read after write across processes: each put, through one gatewayd
#     then the other, is seen by a linearizable and a serializable get on
#     every other connection right after it was acknowledged.
#  3. A stopped client: a client with big ranges in flight on both
#     gatewayd processes is SIGSTOPped; writes through other connections
#     still complete; after SIGCONT it gets its answers, all correct.
#  4. A restarted gatewayd never gets its predecessor's results: a young
#     gatewayd-0 is SIGKILLed with writes in flight while stored is
#     stopped, so the results of the dead slot generation are still to
#     come when its successor (a higher generation, whose first request
#     ids are the same) takes new writes; then stored runs again. The other
#     gatewayd is SIGKILLed twice under load. Any result a gatewayd drops
#     (logged at debug level, so the member runs with --log-level debug)
#     is of another generation or a finished request, and every client
#     got the right answer (each acknowledged revision is its key's).
# Exits 77 when the programs, etcdctl, python3, curl, ss or Go with
# Debian's clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_program ss "Debian package iproute2"
it_build_kvclient
it_init kv-readers

# claim_gen LOGGER N: the generation of the Nth slot claim LOGGER logged.
claim_gen() {
	grep -E "\"logger\":\"$1\".*\"msg\":\"claimed a gateway slot\"" "$IT_CETCD_LOG" | sed -n "${2}p" |
		sed -E 's/.*"generation":([0-9]+).*/\1/'
}
# conns_of PID: established client connections held by process PID.
conns_of() {
	ss -tnpH state established "( sport = :$IT_CPORT )" 2>/dev/null | grep -c "pid=$1," || true
}
# Waits up to $2 s until process $1 holds a client connection.
wait_conns() {
	local deadline=$(($(it_now_ms) + $2 * 1000))
	while (($(it_now_ms) < deadline)); do
		(($(conns_of "$1") > 0)) && return 0
		sleep 0.05
	done
	return 1
}

it_cetcd_start t1 "$IT_TMP/data" "$IT_TMP/cetcd.log" --gateways 2 --log-level debug
if ! it_wait_healthy "$IT_CPORT" 30; then
	fail "the member answers"
	tail -20 "$IT_TMP/cetcd.log"
	exit 1
fi
ep=127.0.0.1:$IT_CPORT
all_acks=()

# ------------------------------------------- 1. readers while stored dies
acks=$IT_TMP/acks1
all_acks+=("$acks")
it_kv_start "$IT_TMP/readers.out" write -endpoint "$ep" -prefix kv/readers -acks "$acks" -writers 2 -readers 16
rw=$IT_KV_PID
check "writers and readers start" it_wait_lines "$acks" 200 30
for i in 1 2 3; do
	check "SIGKILL $i of stored: the launcher restarts it, reads and writes flow again" \
		it_kill_child stored "$acks" 150
done
st=0
it_kv_stop "$rw" "$IT_TMP/readers.out" '^reader-conns |-error |^violation ' || st=$?
ro=$IT_TMP/readers.out
echo "  $(it_kv_fig "$ro" "reads linearizable") linearizable and $(it_kv_fig "$ro" "reads serializable") serializable reads, $(it_kv_fig "$ro" values-checked) values and $(it_kv_fig "$ro" counts-checked) counts checked, $(it_lines "$acks") puts acknowledged, across $IT_KILLS kills of stored"
# (it_kv_are: each count was printed and compares; a missing one fails)
check "every read answered right or failed with a clean gRPC status; header revisions never went back" \
	eval '((st == 0)) && it_kv_are "$ro" violations -eq 0'
check "both gatewayd processes served readers" \
	it_kv_are "$ro" "reader-conns gatewayd-0" -gt 0 "reader-conns gatewayd-1" -gt 0
check "linearizable and serializable reads were made (>= 500 each)" \
	it_kv_are "$ro" "reads linearizable" -ge 500 "reads serializable" -ge 500

# ------------------------------------------- 2. read after write, across gatewayd
st=0
"$KVCLIENT" visibility -endpoint "$ep" -prefix vis -conns 12 -writes 300 >"$IT_TMP/vis.out" 2>&1 || st=$?
it_kv_show "$IT_TMP/vis.out" '^conns |^puts via |^reads-after-ack |-error |^violation '
check "every put was seen right after its acknowledgement by every connection" \
	eval '((st == 0)) && it_kv_are "$IT_TMP/vis.out" violations -eq 0'
check "puts went through both gatewayd processes" \
	it_kv_are "$IT_TMP/vis.out" "puts via gatewayd-0" -gt 0 "puts via gatewayd-1" -gt 0
check "linearizable and serializable reads after the acks (>= 1000 each)" \
	it_kv_are "$IT_TMP/vis.out" "reads-after-ack linearizable" -ge 1000 "reads-after-ack serializable" -ge 1000

# ------------------------------------------- 3. a stopped client
it_kv_start "$IT_TMP/hold.out" hold -endpoint "$ep" -prefix big -conns 8 -inflight 4
hold=$IT_KV_PID
if it_wait_log "$IT_TMP/hold.out" '^ready$' 60; then
	kill -STOP "$hold"
	# what piles up: bytes the client does not read, bytes the gatewayd
	# processes cannot send (the rest waits for HTTP/2 window updates)
	sleep 0.5
	unread=$(ss -tnH state established "( dport = :$IT_CPORT )" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
	unsent=$(ss -tnH state established "( sport = :$IT_CPORT )" 2>/dev/null | awk '{ s += $2 } END { print s + 0 }')
	acks=$IT_TMP/acks3
	all_acks+=("$acks")
	st=0
	"$KVCLIENT" write -endpoint "$ep" -prefix kv/stopped -acks "$acks" -writers 8 -gateways 2 -duration 3s \
		>"$IT_TMP/stopped.out" 2>&1 || st=$?
	kill -CONT "$hold"
	echo "  stopped client: $unread bytes unread in client sockets, $unsent unsent in server sockets; meanwhile $(it_lines "$acks") puts in 3 s, longest $(it_kv_fig "$IT_TMP/stopped.out" max-put-ms) ms"
	it_kv_show "$IT_TMP/stopped.out" '^acks via |^conns |-error |^violation '
	check "writes through both gatewayd processes completed while the client was stopped" \
		eval '((st == 0)) && it_kv_are "$IT_TMP/stopped.out" "acks via gatewayd-0 at start" -ge 50 \
			"acks via gatewayd-1 at start" -ge 50'
	# (a gatewayd held up by the stopped client would take no writes at
	# all: the check above; the longest put is a figure, printed above)
	check "and none failed" test "$(grep -c -- '-error ' "$IT_TMP/stopped.out")" -eq 0
	check "the client gets its answers again after SIGCONT" it_wait_log "$IT_TMP/hold.out" '^resumed after' 30
	check "every range it got (before and after the stop) was complete and right" \
		it_kv_stop "$hold" "$IT_TMP/hold.out" '^resumed|^conns |^ranges |-error |^violation '
else
	fail "the holding client gets answers on all its connections"
	cat "$IT_TMP/hold.out"
fi

# ------------------------------------------- 4. a restarted gatewayd and its predecessor's results
# A young gatewayd-0 (its first request ids) takes writes while stored is
# stopped, so their results are still to come when it is SIGKILLed; its
# successor takes new writes, whose request ids are the same ones, before
# stored runs again. Each result must reach the request it answers.
gen0=$(claim_gen gatewayd-0 1)
pid=$(it_cetcd_child gatewayd-0)
kill -9 "$pid"
gw=$(it_wait_child gatewayd-0 "$pid" 20) || gw=
check "gatewayd-0 comes back after SIGKILL" \
	it_wait_log "$IT_CETCD_LOG" '"logger":"gatewayd-0".*"msg":"ready to serve client requests"' 20 2
acks_a=$IT_TMP/acks4a
acks_b=$IT_TMP/acks4b
all_acks+=("$acks_a" "$acks_b")
it_kv_start "$IT_TMP/inflight-a.out" write -endpoint "$ep" -prefix kv/inflight-a -acks "$acks_a" \
	-writers 8 -per-conn 4 -gateways 2
wa=$IT_KV_PID
spid=$(it_cetcd_child stored)
it_on_exit+=("kill -CONT $spid 2>/dev/null")
if it_wait_log "$IT_TMP/inflight-a.out" '^started' 30; then
	kill -STOP "$spid"
	t0=$(it_now_ms)
	sleep 0.3
	inflight=$(conns_of "$gw")
	early=$(it_lines "$acks_a")
	kill -9 "$gw"
	check "the launcher starts a new gatewayd-0 while stored is stopped" \
		it_wait_log "$IT_CETCD_LOG" '"logger":"gatewayd-0".*"msg":"ready to serve client requests"' 20 3
	gw=$(it_wait_child gatewayd-0 "$gw" 20) || gw=
	it_kv_start "$IT_TMP/inflight-b.out" write -endpoint "$ep" -prefix kv/inflight-b -acks "$acks_b" \
		-writers 8 -per-conn 4 -gateways 2
	wb=$IT_KV_PID
	check "new writers reach the new gatewayd-0" wait_conns "$gw" 10
	sleep 0.3
	kill -CONT "$spid"
	echo "  stored stopped for $(($(it_now_ms) - t0)) ms; gatewayd-0 killed with $inflight connections, $early acknowledgements before"
	check "writes flow again once stored runs" it_wait_lines "$acks_b" 300 30
	for i in 1 2; do
		check "SIGKILL $i of gatewayd-1 under load: restarted, writes flow again" it_kill_child gatewayd-1 "$acks_b" 300
	done
	check "the writers through the new gatewayd-0 saw no violation" \
		it_kv_stop "$wb" "$IT_TMP/inflight-b.out" '^acks via |^conns |-error |^violation '
else
	fail "writers start"
fi
check "the writers of the killed gatewayd-0 saw no violation" \
	it_kv_stop "$wa" "$IT_TMP/inflight-a.out" '^acks via |^conns |-error |^violation '
gen1=$(claim_gen gatewayd-0 2)
gen2=$(claim_gen gatewayd-0 3)
echo "  gatewayd-0: slot generation $gen0 -> $gen1 -> $gen2; $(it_lines "$acks_a") + $(it_lines "$acks_b") puts acknowledged"
check "slot generations grow with each restart" test "${gen1:-0}" -gt "${gen0:-0}" -a "${gen2:-0}" -gt "${gen1:-0}"
drops=$(grep -E '"logger":"gatewayd-[0-9]+".*"msg":"dropped a record from the rings"' "$IT_CETCD_LOG" || true)
ndrops=$(grep -c . <<<"$drops" || true)
echo "  results dropped by gatewayd processes (debug log), by reason and generation: $ndrops"
sed -E 's/.*"logger":"([^"]*)".*"reason":"([^"]*)".*"generation":([0-9]+).*/\1: \2, generation \3/' <<<"$drops" |
	grep . | sort | uniq -c | sed 's/^/    /' || true
bad=0
[[ -z $drops ]] || bad=$(grep -cvE '"reason":"(another slot generation|no such request waits)"' <<<"$drops" || true)
check "any result a gatewayd dropped was of another generation or a finished request" test "$bad" -eq 0

# ------------------------------------------- every acknowledged put, checked
list=$(IFS=,; echo "${all_acks[*]}")
# (as many as the ack files hold: a check that read none found them all)
nacks=$({ cat "${all_acks[@]}" 2>/dev/null || true; } | wc -l)
check "every acknowledged put ($nacks) reads back with its value and revision" \
	it_acked_at "$ep" kv "$list" "$nacks"
st=0
it_cetcd_stop || st=$?
check "the member stops on SIGTERM (exit 0)" test "$st" -eq 0

it_summary
