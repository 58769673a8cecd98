#!/usr/bin/env bash
# No acknowledged write is lost when the processes of a member die.
# Writers on etcd's Go client (tests/tools/kvclient, several connections
# spread over two gatewayd processes) put fresh keys continuously and
# record every acknowledged put (key, value, revision). Meanwhile raftd,
# stored and a gatewayd are each SIGKILLed several times, one at a time,
# the next kill only once writes flow again after the launcher restarted
# the victim. Then every acknowledged put must be readable with its value
# and mod revision, and revisions must be unique and grow in
# acknowledgement order per writer. The same holds after SIGKILL of the
# launcher (every process dies) and a start on the same data dir, and after
# a SIGTERM stop and a start on the same data dir; revisions continue from
# where they were.
# Exits 77 when the programs, etcdctl, python3, curl or Go with Debian's
# clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_kvclient
it_init kv-durability

data=$IT_TMP/data
it_cetcd_start t1 "$data" "$IT_TMP/cetcd.log" --gateways 2
if ! it_wait_healthy "$IT_CPORT" 30; then
	fail "the member answers"
	tail -20 "$IT_TMP/cetcd.log"
	exit 1
fi
ep=127.0.0.1:$IT_CPORT

# ------------------------------------------------ kills of single processes
acks1=$IT_TMP/acks1
it_kv_start "$IT_TMP/writer1.out" write -endpoint "$ep" -prefix kv/run1 -acks "$acks1" -writers 4 -per-conn 2
w1=$IT_KV_PID
check "writers start and get acknowledgements" it_wait_lines "$acks1" 200 30

victims=(raftd stored gatewayd-0 raftd stored gatewayd-1 raftd stored gatewayd-0)
for victim in "${victims[@]}"; do
	check "SIGKILL of $victim: the launcher restarts it and writes flow again" it_kill_child "$victim" "$acks1" 250
done
check "the writers saw no violation (revisions grow per writer, clean errors only)" \
	it_kv_stop "$w1" "$IT_TMP/writer1.out"
n1=$(it_lines "$acks1")
echo "  writers: $n1 acknowledged puts, longest put $(it_kv_fig "$IT_TMP/writer1.out" max-put-ms) ms"
check "each kind of process was killed 3 times" test "$IT_KILLS" -eq 9

# (it_acked_at: kvclient check exits 0, read all N acknowledgements,
# found all N, and said "violations 0")
check "every one of the $n1 acknowledged puts survived the kills (value, mod revision)" \
	it_acked_at "$ep" kv "$acks1" "$n1"

# ------------------------------------------- SIGKILL of the whole member
acks2=$IT_TMP/acks2
it_kv_start "$IT_TMP/writer2.out" write -endpoint "$ep" -prefix kv/run2 -acks "$acks2" -writers 4 -per-conn 2
w2=$IT_KV_PID
check "writers start again" it_wait_lines "$acks2" 200 30
it_cetcd_kill_restart "$acks2" "$w2" "$IT_TMP/writer2.out" "$IT_TMP/cetcd2.log"
n2=$(it_lines "$acks2")
echo "  writers: $n2 acknowledged puts"
check "all $((n1 + n2)) acknowledged puts are there after SIGKILL of the member" \
	it_acked_at "$ep" kv "$acks1,$acks2" $((n1 + n2))

# ------------------------------------------------ SIGTERM and a new start
st=0
it_cetcd_stop || st=$?
check "SIGTERM stops the member (exit 0)" test "$st" -eq 0
it_cetcd_restart "$IT_TMP/cetcd3.log"
check "it starts again on the same data dir" it_wait_healthy "$IT_CPORT" 30
check "all $((n1 + n2)) acknowledged puts are still there after the stop and start" \
	it_acked_at "$ep" kv "$acks1,$acks2" $((n1 + n2))
last=$(sort -n -k3 "$acks1" "$acks2" | tail -1 | cut -d' ' -f3)
rev=$(etcdctl --endpoints "$ep" put kv/after-restart x -w json | grep -oE '"revision":[0-9]+' | cut -d: -f2)
check "a new put gets a revision above every acknowledged one ($rev > $last)" test "${rev:-0}" -gt "$last"
st=0
it_cetcd_stop || st=$?
check "and it stops again with exit 0" test "$st" -eq 0

it_summary
