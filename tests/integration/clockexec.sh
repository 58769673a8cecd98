#!/usr/bin/env bash
# tests/tools/clockexec, with which the fault suite steps an etcd member's
# wall clock (a Go program: no preloaded library reaches its clock):
#   - a program's wall clock reads the kernel's plus the offset in
#     CLOCKSTEP_FILE, and a write to the file steps it while it runs
#     (bash's $EPOCHSECONDS, read through gettimeofday, which glibc would
#     answer from the vDSO without a system call if clockexec had not
#     hidden it); its exit status and the signal that killed it come back;
#   - Debian's etcd under it logs with its clock stepped, serves, keeps a
#     lease through a forward step of 10 minutes (its lessor counts on the
#     monotonic clock), stops on the SIGTERM passed on, and dies with
#     clockexec when that is killed.
# Exits 77 without etcd (Debian package etcd-server) or etcdctl 3.4.
source "$(dirname "$0")/lib.sh"
it_need_etcd
it_need_etcdctl
CLOCKEXEC=$IT_BUILD/tests/clockexec
[[ -x $CLOCKEXEC ]] || it_skip "$CLOCKEXEC is not built"
it_init clockexec

clk=$IT_TMP/clock
# set OFFSET: the clock file, written in place as the fault suite does
set_offset() { printf '%-15s\n' "$1" 1<>"$clk"; }
# near A B: |A - B| <= 5
near() { (($1 - $2 <= 5 && $2 - $1 <= 5)); }

# 1. bash reads its clock twice, stepped between the two
set_offset -600
coproc CLK { CLOCKSTEP_FILE=$clk "$CLOCKEXEC" bash -c 'read -r; echo "$EPOCHSECONDS"; read -r; echo "$EPOCHSECONDS"'; }
clk_pid=$CLK_PID
echo >&"${CLK[1]}"
read -r t1 <&"${CLK[0]}"
check "the program's clock reads the kernel's less 600 s" near "$t1" $(($(date +%s) - 600))
set_offset +90
echo >&"${CLK[1]}"
read -r t2 <&"${CLK[0]}"
check "a write to the file steps it while it runs: 90 s ahead now" near "$t2" $(($(date +%s) + 90))
wait "$clk_pid" 2>/dev/null || true
st=0
CLOCKSTEP_FILE=$clk "$CLOCKEXEC" bash -c 'exit 7' || st=$?
check "the program's exit status comes back" test "$st" -eq 7
st=0
CLOCKSTEP_FILE=$clk "$CLOCKEXEC" bash -c 'kill -TERM $$' || st=$?
check "and the signal that killed it, as 128 + its number" test "$st" -eq 143

# 2. etcd under it
set_offset +3600
read -r port pport < <(it_free_ports 2)
ctl() { etcdctl --endpoints "127.0.0.1:$port" --command-timeout 5s "$@"; }
log=$IT_TMP/etcd.log
# start_etcd LOG: etcd under clockexec (pid cpid), its log in LOG
start_etcd() {
	it_bg "$1" env CLOCKSTEP_FILE="$clk" "$CLOCKEXEC" etcd --name clk --data-dir "$IT_TMP/data" \
		--listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
		--listen-peer-urls "http://127.0.0.1:$pport" \
		--initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "clk=http://127.0.0.1:$pport" --logger zap
	cpid=$IT_BG_PID
}
start_etcd "$log"
check "etcd answers" it_wait_healthy "$port" 30
etcd_pid=$(pgrep -P "$cpid" etcd)
check "etcd runs as clockexec's child" test -n "$etcd_pid"
# last_ts: the time of etcd's last log line, in seconds since the epoch
last_ts() {
	python3 -c 'import datetime, json, sys
ts = [json.loads(l)["ts"] for l in open(sys.argv[1]) if l.startswith("{")][-1]
print(int(datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()))' "$1"
}
check "its log is an hour ahead" near "$(last_ts "$log")" $(($(date +%s) + 3600))
check "a put" ctl put k v
check "a get" test "$(ctl get k --print-value-only)" = v
lease=$(ctl lease grant 4 | awk '{print $2}')
check "a lease of 4 s" test -n "$lease"
check "a key on it" ctl put lk v --lease="$lease"
granted=$(it_now_ms)
set_offset +4200
sleep 1
check "10 minutes forward, the key is still there (the lease counts on the monotonic clock)" \
	test "$(ctl get lk --print-value-only)" = v
# a compaction is a line of etcd's log ("finished scheduled compaction")
rev=$(ctl put k2 v -w json | python3 -c 'import json, sys; print(json.load(sys.stdin)["header"]["revision"])')
check "a compaction" ctl compact "$rev"
check "which etcd logs" it_wait_log "$log" '"finished scheduled compaction"' 5
check "etcd logs with the new offset" near "$(last_ts "$log")" $(($(date +%s) + 4200))
gone() { [[ -z $(ctl get lk --print-value-only) ]]; }
check "the key goes with the lease" it_until 10000 gone
check "not before its 4 s" test $(($(it_now_ms) - granted)) -ge 3900
kill -TERM "$cpid"
st=0
wait "$cpid" || st=$?
check "SIGTERM to clockexec stops etcd, and clockexec exits" it_wait_gone "$etcd_pid" 10000
check "with etcd's status (143: etcd ends by the signal after its cleanup)" test "$st" -eq 143

start_etcd "$log.2"
check "etcd answers again" it_wait_healthy "$port" 30
etcd_pid=$(pgrep -P "$cpid" etcd)
kill -KILL "$cpid"
check "killed with clockexec, etcd dies too" it_wait_gone "$etcd_pid" 10000
it_summary
