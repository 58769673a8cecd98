#!/usr/bin/env bash
# Where one client's put spends its time, stage by stage, on a running
# cetcd member.
#
#   bench/put-stages.sh HOST:PORT [N]
#
# Sends N puts (default 300; gRPC Put of "foo", 256-byte value), one at a
# time on one connection (h2load -c 1 -m 1), while perf records the
# scheduler's wake-ups and switches, every syscall's entry and exit and
# io_uring's submissions and completions on every CPU, then prints each
# stage's median and mean (bench/put-stages.py says which stages). Needs
# perf with tracepoint access (root) and h2load; the member's gatewayd is
# the process listening on PORT, raftd and stored its siblings. Tracing
# costs each syscall and switch a few microseconds, so the stages read
# longer than untraced; compare stages of one run, or two builds traced
# alike.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ep=${1:?usage: put-stages.sh HOST:PORT [N]}
n=${2:-300}
command -v perf >/dev/null || { echo "put-stages: perf missing" >&2; exit 1; }
command -v h2load >/dev/null || { echo "put-stages: h2load missing (nghttp2-client)" >&2; exit 1; }
gw=$(ss -Hltnp "sport = :${ep##*:}" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
[[ -n $gw ]] || { echo "put-stages: nothing listens on $ep" >&2; exit 1; }
parent=$(awk '{ print $4 }' "/proc/$gw/stat")
pid_of() {
  local p
  for p in $(pgrep -P "$parent"); do
    [[ $(cat "/proc/$p/comm") == "$1" ]] && { echo "$p"; return; }
  done
  echo "put-stages: no $1 beside gatewayd $gw" >&2; exit 1
}
raft=$(pid_of raftd) st=$(pid_of stored)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -c 'import sys; b = bytes.fromhex("0a03666f6f128002" + "61" * 256)
open(sys.argv[1], "wb").write(b"\0" + len(b).to_bytes(4, "big") + b)' "$work/put.bin"
perf record -q -o "$work/perf.data" -a -e sched:sched_switch -e sched:sched_wakeup \
  -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit \
  -e io_uring:io_uring_submit_req -e io_uring:io_uring_complete -- \
  h2load -n "$n" -c 1 -m 1 -d "$work/put.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
  "http://$ep/etcdserverpb.KV/Put" | grep -E '^(finished|time for request)' >&2
perf script -i "$work/perf.data" -F comm,pid,tid,cpu,time,event,trace 2>/dev/null |
  python3 "$root/bench/put-stages.py" "$gw" "$raft" "$st"
