#!/usr/bin/env bash
# Memory held by Watch streams and watchers, cetcd beside Debian's etcd 3.4.
#
#   bench/watch-memory.sh [--streams S] [--per-stream W] [--conns C] [--key-size K]
#
# For each server in turn (a fresh single member each round, BENCH_ROUNDS
# rounds, default 3, alternating which goes first), tests/tools/watchmem
# opens C connections (10) carrying S Watch streams (1000), then W watchers
# on each stream (100; 100,000 in all), each on a key of its own
# ("wmR/sSSSS/wWWWW", 15 bytes, or padded to K bytes). The
# server's resident memory is measured before the client connects, with
# the streams open and no watchers, and with every watcher created:
#   cetcd: PSS of every process of the member (/proc/PID/smaps), the
#     mappings of the runtime region left out, plus the region file's
#     resident pages (fincore), so pages the daemons share count once;
#   etcd: PSS of its process.
# Prints per server the three figures (medians) and bytes per extra
# stream and per extra watcher, then a last line of name=value pairs with
# cetcd's figures, etcd's and the ratios (cetcd / etcd, below 1 favours
# cetcd). Goals for cetcd: at most 100 bytes per watcher and 2 KiB per
# stream (watcher_goal_ok, stream_goal_ok), judged on the figures without
# file-backed mappings: on a shared machine the PSS of the libraries
# moves by megabytes as other processes map them and exit, as much as
# 1,000 streams take.
#
# Environment: CETCD_BUILD (default build/), BENCH_DIR (data dirs;
# default /var/tmp), BENCH_ROUNDS (3), BENCH_SERVERS ("cetcd etcd"),
# WATCHMEM_CACHE (where watchmem is built; ~/.cache/cetcd-watchmem),
# SETTLE_S (seconds to wait before each reading; 5), BENCH_LOCK (the lock
# that keeps benchmark runs apart, as etcd-compare.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
build=${CETCD_BUILD:-$root/build}
basedir=${BENCH_DIR:-/var/tmp}
rounds=${BENCH_ROUNDS:-3}
servers=${BENCH_SERVERS:-cetcd etcd}
settle=${SETTLE_S:-5}
cache=${WATCHMEM_CACHE:-$HOME/.cache/cetcd-watchmem}
streams=1000 per_stream=100 conns=10 key_size=0
while (($#)); do
  case $1 in
  --streams) streams=$2; shift 2 ;;
  --per-stream) per_stream=$2; shift 2 ;;
  --conns) conns=$2; shift 2 ;;
  --key-size) key_size=$2; shift 2 ;;
  *) echo "watch-memory: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x $build/bin/cetcd ]] || { echo "watch-memory: build cetcd first (tools/build.sh)" >&2; exit 1; }
command -v etcd >/dev/null || { echo "watch-memory: etcd missing (bench/etcd-tools.sh installs it)" >&2; exit 1; }
command -v fincore >/dev/null || { echo "watch-memory: fincore missing (util-linux)" >&2; exit 1; }
command -v go >/dev/null || { echo "watch-memory: go missing (golang-go)" >&2; exit 1; }

watchmem=$cache/watchmem
build_go "$watchmem" "$root/tests/tools/watchmem"
bench_lock watch-memory

work=$(mktemp -d "$basedir/cetcd-watchmem.XXXXXX")
server_pid=""
client_pid=""
stop_server() {
  local p=$server_pid
  server_pid=""
  [[ -z $p ]] || stop_pid "$p"
}
stop_client() {
  local p=$client_pid
  client_pid=""
  [[ -n $p ]] || return 0
  kill -TERM "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}
trap 'stop_client; stop_server; rm -rf "$work"' EXIT

# start_server KIND N: a fresh single member; sets server_pid, endpoint.
start_server() {
  local kind=$1 n=$2 cport pport args
  cport=$(free_port); pport=$(free_port)
  args=$(member_args "$work/$kind.$n" "$cport" "$pport")
  if [[ $kind == cetcd ]]; then
    setsid "$build/bin/cetcd" $args >>"$work/$kind.log" 2>&1 &
  else
    setsid etcd $args >>"$work/$kind.log" 2>&1 &
  fi
  server_pid=$!
  endpoint=127.0.0.1:$cport
  wait_ready "$endpoint" 300 && return 0
  echo "watch-memory: $kind did not start; its log:" >&2
  tail -n 20 "$work/$kind.log" >&2
  return 1
}

# server_bytes: resident bytes of the server (process group $server_pid):
# the sum of its processes' PSS, without the mappings of files on
# /dev/shm (the runtime region), plus those files' resident pages; then
# the same without file-backed mappings (libraries, the db file: their
# PSS moves with whatever else on the machine maps them).
server_bytes() {
  python3 - "$server_pid" <<'PYEOF'
import os, subprocess, sys
pgrp = int(sys.argv[1])
total = anon = 0
shm = {}  # (dev, inode) -> a path that opens the file
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read().rsplit(") ", 1)[1].split()
        if int(st[2]) != pgrp:
            continue
        with open(f"/proc/{pid}/smaps") as f:
            lines = f.read().splitlines()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        continue
    skip = False
    for line in lines:
        parts = line.split()
        if "-" in parts[0] and not parts[0].endswith(":"):
            # A mapping's header: range perms offset dev inode [path]
            path = " ".join(parts[5:])
            skip = path.startswith("/dev/shm/")
            filed = path.startswith("/")
            if skip:
                shm.setdefault((parts[3], parts[4]), f"/proc/{pid}/map_files/{parts[0]}")
        elif parts[0] == "Pss:" and not skip:
            total += int(parts[1]) * 1024
            if not filed:
                anon += int(parts[1]) * 1024
for path in shm.values():
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         capture_output=True, text=True, check=True).stdout.split()
    total += int(out[0])
    anon += int(out[0])
print(total, anon)
PYEOF
}

# one_round KIND N: prints "base streams watchers" (bytes), then the same
# three without file-backed mappings.
one_round() {
  local kind=$1 n=$2 base s w line
  local -a b3 s3 w3
  start_server "$kind" "$n"
  sleep "$settle"
  read -r -a b3 < <(server_bytes)
  coproc WM { exec "$watchmem" -endpoint "$endpoint" -conns "$conns" -streams "$streams" \
    -per-stream "$per_stream" -prefix "wm$n" -key-size "$key_size" 2>>"$work/watchmem.log"; }
  client_pid=$WM_PID
  read -r line <&"${WM[0]}" || { echo "watch-memory: watchmem failed against $kind:" >&2; tail -5 "$work/watchmem.log" >&2; return 1; }
  sleep "$settle"
  read -r -a s3 < <(server_bytes)
  echo >&"${WM[1]}"
  read -r line <&"${WM[0]}" || { echo "watch-memory: watchmem failed against $kind:" >&2; tail -5 "$work/watchmem.log" >&2; return 1; }
  sleep "$settle"
  read -r -a w3 < <(server_bytes)
  echo >&"${WM[1]}"
  stop_client
  stop_server
  echo "${b3[0]} ${s3[0]} ${w3[0]} ${b3[1]} ${s3[1]} ${w3[1]}"
}


declare -A got=()
for ((k = 0; k < rounds; k++)); do
  order=$servers
  ((k % 2)) && order=$(tr ' ' '\n' <<<"$servers" | tac | tr '\n' ' ')
  for server in $order; do
    read -r b s w ab as aw < <(one_round "$server" "$k")
    [[ -n ${aw:-} ]] || exit 1
    per_stream_b=$(( (s - b) / streams ))
    per_watcher_b=$(( (w - s) / (streams * per_stream) ))
    anon_stream_b=$(( (as - ab) / streams ))
    anon_watcher_b=$(( (aw - as) / (streams * per_stream) ))
    echo "watch-memory: round $k $server: base $b streams $s watchers $w bytes;" \
      "$per_stream_b per stream, $per_watcher_b per watcher; without file-backed" \
      "mappings $anon_stream_b per stream, $anon_watcher_b per watcher" >&2
    got[$server.base]+="$b "; got[$server.streams]+="$s "; got[$server.watchers]+="$w "
    got[$server.per_stream]+="$per_stream_b "; got[$server.per_watcher]+="$per_watcher_b "
    got[$server.anon_per_stream]+="$anon_stream_b "; got[$server.anon_per_watcher]+="$anon_watcher_b "
  done
done
declare -A R=()
for f in "${!got[@]}"; do R[$f]=$(tr ' ' '\n' <<<"${got[$f]}" | grep . | median); done

row() { printf '%-28s %14s %14s\n' "$1" "$2" "$3"; }
row "($streams streams, $((streams * per_stream)) watchers)" cetcd etcd
row "base (bytes)" "${R[cetcd.base]:-0}" "${R[etcd.base]:-0}"
row "with streams (bytes)" "${R[cetcd.streams]:-0}" "${R[etcd.streams]:-0}"
row "with watchers (bytes)" "${R[cetcd.watchers]:-0}" "${R[etcd.watchers]:-0}"
row "per stream (bytes)" "${R[cetcd.per_stream]:-0}" "${R[etcd.per_stream]:-0}"
row "per watcher (bytes)" "${R[cetcd.per_watcher]:-0}" "${R[etcd.per_watcher]:-0}"
row "  anon: per stream" "${R[cetcd.anon_per_stream]:-0}" "${R[etcd.anon_per_stream]:-0}"
row "  anon: per watcher" "${R[cetcd.anon_per_watcher]:-0}" "${R[etcd.anon_per_watcher]:-0}"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else printf "nan" }'; }
echo "cetcd_per_watcher=${R[cetcd.per_watcher]:-0}" "etcd_per_watcher=${R[etcd.per_watcher]:-0}" \
  "per_watcher_ratio=$(ratio "${R[cetcd.per_watcher]:-0}" "${R[etcd.per_watcher]:-0}")" \
  "cetcd_per_stream=${R[cetcd.per_stream]:-0}" "etcd_per_stream=${R[etcd.per_stream]:-0}" \
  "per_stream_ratio=$(ratio "${R[cetcd.per_stream]:-0}" "${R[etcd.per_stream]:-0}")" \
  "watcher_goal_ok=$(( ${R[cetcd.anon_per_watcher]:-999} <= 100 ))" \
  "stream_goal_ok=$(( ${R[cetcd.anon_per_stream]:-99999} <= 2048 ))" \
  "cetcd_anon_per_watcher=${R[cetcd.anon_per_watcher]:-0}" "etcd_anon_per_watcher=${R[etcd.anon_per_watcher]:-0}" \
  "cetcd_anon_per_stream=${R[cetcd.anon_per_stream]:-0}" "etcd_anon_per_stream=${R[etcd.anon_per_stream]:-0}" \
  "rounds=$rounds"
